//! What `kv_service` parses and opens before any work (the stall probe,
//! the cluster, the self-test): `--share`, the address it listens on and
//! the file its JSON goes to, so that a bad `--listen` or `--json` fails
//! at once, naming itself, instead of after the self-test.

use anyhow::Context;
use std::path::Path;

/// `--share I/N`.
pub fn share(s: &str) -> anyhow::Result<(u64, u64)> {
    let bad = || anyhow::anyhow!("--share {s:?}: I/N with 0 <= I < N <= 1024");
    let (i, n) = s.split_once('/').ok_or_else(bad)?;
    let (i, n): (u64, u64) = (i.parse().map_err(|_| bad())?, n.parse().map_err(|_| bad())?);
    if i >= n || n > 1024 {
        return Err(bad());
    }
    Ok((i, n))
}

/// Binds `--listen`, non-blocking (for tokio's `TcpListener::from_std`).
pub fn listen(addr: &str) -> anyhow::Result<std::net::TcpListener> {
    let l = std::net::TcpListener::bind(addr).with_context(|| format!("--listen {addr:?}"))?;
    l.set_nonblocking(true)
        .with_context(|| format!("--listen {addr:?}"))?;
    Ok(l)
}

/// Creates `--json`'s file, empty until the self-test's figures are
/// written into it.
pub fn json_file(path: &Path) -> anyhow::Result<std::fs::File> {
    std::fs::File::create(path).with_context(|| format!("cannot write {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The errors name the flag's value; good values open.
    #[test]
    fn a_bad_address_or_json_path_is_named() {
        let e = format!("{:#}", listen("bogus").unwrap_err());
        assert!(e.starts_with("--listen \"bogus\": "), "{e}");
        assert!(listen("127.0.0.1:0").is_ok());
        let bad = Path::new("/nonexistent-kv-service-dir/x.json");
        let e = format!("{:#}", json_file(bad).unwrap_err());
        assert!(
            e.starts_with(&format!("cannot write {}: ", bad.display())),
            "{e}"
        );
        let dir = tempfile::tempdir().expect("a temporary directory");
        assert!(json_file(&dir.path().join("x.json")).is_ok());
    }
}
