//! Feature `rdma` only: compiles `csrc/dm_shim.c`, the static-inline
//! extended verbs (device memory) as linkable functions, against the
//! rdma-core headers ibverbs-sys built its bindings from (its `links`
//! metadata, `DEP_IBVERBS_INCLUDE`), else the system's.

fn main() {
    println!("cargo:rerun-if-changed=csrc/dm_shim.c");
    println!("cargo:rerun-if-changed=build.rs");
    #[cfg(feature = "rdma")]
    {
        let mut b = cc::Build::new();
        b.file("csrc/dm_shim.c").warnings(true);
        if let Ok(inc) = std::env::var("DEP_IBVERBS_INCLUDE") {
            b.include(inc);
        }
        b.compile("dm_shim");
    }
}
