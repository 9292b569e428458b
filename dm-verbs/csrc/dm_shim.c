/*
 * The static-inline extended verbs of <infiniband/verbs.h> that the rdma
 * backend needs for device memory (Sherman §4.3's on-chip lock table), as
 * real functions: bindgen cannot bind an inline function, and the inline
 * bodies reach the provider through `struct verbs_context`, whose layout
 * only the header knows. Compiled by build.rs against the same rdma-core
 * headers ibverbs-sys generated its bindings from (feature `rdma` only).
 * The Rust side (src/rdma/ffi.rs) treats every pointer as opaque.
 */
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <infiniband/verbs.h>

/* Bytes of device memory the NIC offers (ibv_device_attr_ex.max_dm_size);
 * 0 when it offers none or the provider lacks ibv_query_device_ex. */
uint64_t dm_shim_max_dm_size(struct ibv_context *ctx)
{
	struct ibv_device_attr_ex attr = {0};

	if (ibv_query_device_ex(ctx, NULL, &attr))
		return 0;
	return attr.max_dm_size;
}

/* ibv_alloc_dm of `len` bytes (8-byte aligned); NULL with errno set. */
struct ibv_dm *dm_shim_alloc_dm(struct ibv_context *ctx, uint64_t len)
{
	struct ibv_alloc_dm_attr attr = {.length = len, .log_align_req = 3};

	return ibv_alloc_dm(ctx, &attr);
}

/* ibv_free_dm: 0 or an errno value. */
int dm_shim_free_dm(struct ibv_dm *dm)
{
	return ibv_free_dm(dm);
}

/* Registers the whole of `dm` (`len` bytes) zero-based (remote addresses are
 * offsets from 0) with local write and remote READ/WRITE/atomic access;
 * NULL with errno set. */
struct ibv_mr *dm_shim_reg_dm_mr(struct ibv_pd *pd, struct ibv_dm *dm, uint64_t len)
{
	unsigned int access = IBV_ACCESS_ZERO_BASED | IBV_ACCESS_LOCAL_WRITE |
			      IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
			      IBV_ACCESS_REMOTE_ATOMIC;

	return ibv_reg_dm_mr(pd, dm, 0, len, access);
}

/* Copies `len` bytes (a multiple of 4) from host memory into `dm` at `off`:
 * 0 or an errno value. */
int dm_shim_memcpy_to_dm(struct ibv_dm *dm, uint64_t off, const void *src, uint64_t len)
{
	return ibv_memcpy_to_dm(dm, off, src, len);
}
