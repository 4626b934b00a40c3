//! Facts about this machine that bound what the command line allocates.

/// Bytes of memory available to this process now (Linux: `MemAvailable` in
/// `/proc/meminfo`), or `None` where that cannot be known.
pub fn available_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// Refuses an allocation of `bytes` for `what` that this machine cannot
/// hold: on Linux a huge allocation may succeed and then get the process
/// killed when touched, so the check comes first.
pub fn check_allocation(bytes: u64, what: &str) -> anyhow::Result<()> {
    if let Some(avail) = available_memory() {
        if bytes > avail {
            anyhow::bail!("{what} needs {bytes} bytes, more than the memory available ({avail} bytes)");
        }
    }
    Ok(())
}
