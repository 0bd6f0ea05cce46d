//! What a process used, read from the kernel: CPU time (getrusage, /proc/PID/stat,
//! CLOCK_THREAD_CPUTIME_ID) and resident memory (/proc/PID/status). Linux only; knows nothing of
//! the benchmarks that ask.

use std::time::Duration;

/// User + system CPU time of the whole process so far.
pub fn process_cpu() -> Duration {
    // SAFETY: getrusage writes only into the struct we pass; all-zero is a valid rusage.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let time = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    time(usage.ru_utime) + time(usage.ru_stime)
}

/// Seconds of CPU (user + system) a process has used, all its threads (those that ended
/// included): /proc/PID/stat fields 14 and 15, in clock ticks (10 ms here: fine for windows of
/// seconds). `None` for no process, or one that is gone.
pub fn cpu_seconds(pid: Option<u32>) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", pid?)).ok()?;
    // The command name (field 2) may hold spaces and parentheses: fields are counted after it.
    let after_name = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    // SAFETY: sysconf has no preconditions.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    Some(ticks as f64 / per_second.max(1) as f64)
}

/// CPU time of the calling thread so far (CLOCK_THREAD_CPUTIME_ID: nanosecond precision; a
/// system call of well under a microsecond).
pub fn thread_cpu() -> Duration {
    // SAFETY: clock_gettime writes only into the timespec we pass.
    let t = unsafe {
        let mut t: libc::timespec = std::mem::zeroed();
        libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t);
        t
    };
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

/// `VmRSS` and `VmHWM` (resident now, and at its peak) of a process, in bytes.
pub fn resident_bytes(pid: u32) -> Option<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| -> Option<u64> {
        let line = status.lines().find(|l| l.starts_with(name))?;
        let kib: u64 = line[name.len()..]
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse()
            .ok()?;
        Some(kib * 1024)
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}
