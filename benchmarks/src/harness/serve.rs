//! The one way the benchmarks run `pure-serve`: the binary beside `pure-bench`, its one-shot
//! commands (`import`, `export`), and [`Server`], a server started on a free loopback port that
//! ends with us. Knows the command line and the ready line of pure-serve; knows nothing of any
//! app, its routes or its data.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};

use anyhow::{anyhow, bail, Context, Result};

/// The pure-serve binary beside this one (cargo builds them into one directory).
pub fn binary() -> Result<PathBuf> {
    let binary = std::env::current_exe()?.with_file_name("pure-serve");
    if !binary.exists() {
        bail!(
            "{} not found: build it first (cargo build --release -p pure-serve)",
            binary.display()
        );
    }
    Ok(binary)
}

/// Runs `pure-serve <args>` to completion; its output goes to ours, a failure is an error.
pub fn run_pure_serve(args: &[&std::ffi::OsStr]) -> Result<()> {
    let binary = binary()?;
    // Its report goes to our stderr: our stdout is the benchmark's own report.
    let status = Command::new(&binary)
        .args(args)
        .stdout(std::io::stderr())
        .status()
        .with_context(|| format!("start {}", binary.display()))?;
    if !status.success() {
        bail!("pure-serve {:?} failed: {status}", args);
    }
    Ok(())
}

/// `pure-serve import app --data data files...`.
pub fn import(app: &Path, data: &Path, files: &[PathBuf]) -> Result<()> {
    let mut args: Vec<&std::ffi::OsStr> = vec![
        "import".as_ref(),
        app.as_os_str(),
        "--data".as_ref(),
        data.as_os_str(),
    ];
    args.extend(files.iter().map(|f| f.as_os_str()));
    run_pure_serve(&args)
}

/// `pure-serve export app --data data --out out`.
pub fn export(app: &Path, data: &Path, out: &Path) -> Result<()> {
    run_pure_serve(&[
        "export".as_ref(),
        app.as_os_str(),
        "--data".as_ref(),
        data.as_os_str(),
        "--out".as_ref(),
        out.as_os_str(),
    ])
}

/// Makes the server a child that ends with us, whichever way we end (a SIGKILL included).
fn end_with_us(command: &mut Command) {
    // SAFETY: prctl in the child between fork and exec touches no memory of ours.
    unsafe {
        use std::os::unix::process::CommandExt;
        command.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
            Ok(())
        });
    }
}

/// A pure-serve started here; stopped (SIGTERM, then waited for) on [`Server::stop`] or drop.
pub struct Server {
    pub address: SocketAddr,
    child: Option<Child>,
}

impl Server {
    /// Starts `pure-serve app --data data --listen 127.0.0.1:0 extra...` and waits for its ready
    /// line, which names the port it took.
    pub fn start(app: &Path, data: &Path, extra: &[&str]) -> Result<Server> {
        let binary = binary()?;
        let mut command = Command::new(&binary);
        end_with_us(&mut command);
        let mut child = command
            .arg(app)
            .arg("--data")
            .arg(data)
            .args(["--listen", "127.0.0.1:0"])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .with_context(|| format!("start {}", binary.display()))?;
        let stdout = child.stdout.take().expect("piped stdout");
        // From here the child is ours to stop, whatever happens next (see Drop).
        let mut server = Server {
            address: SocketAddr::from(([127, 0, 0, 1], 0)),
            child: Some(child),
        };
        server.address = server.ready_address(stdout)?;
        Ok(server)
    }

    /// The address of the ready line (`... http://ADDRESS`), the first line pure-serve prints.
    fn ready_address(&mut self, stdout: ChildStdout) -> Result<SocketAddr> {
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line)?;
        if line.is_empty() {
            let status = self.child.as_mut().expect("running").wait()?;
            bail!("pure-serve ended before it was ready: {status} (its messages are above)");
        }
        line.split("http://")
            .nth(1)
            .and_then(|a| a.trim().parse().ok())
            .ok_or_else(|| anyhow!("pure-serve did not print its ready line (got {line:?})"))
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// The server's exit status, if it has ended.
    pub fn exited(&mut self) -> Result<Option<std::process::ExitStatus>> {
        match &mut self.child {
            Some(child) => Ok(child.try_wait()?),
            None => Ok(None),
        }
    }

    /// Stops the server cleanly and says whether it exited 0.
    pub fn stop(mut self) -> Result<()> {
        let mut child = self.child.take().expect("running");
        // SAFETY: kill(2) on our own child, not yet waited for.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let status = child.wait()?;
        if !status.success() {
            bail!("pure-serve did not stop cleanly: {status}");
        }
        Ok(())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child {
            // SAFETY: as in `stop`.
            unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
            let _ = child.wait();
        }
    }
}
