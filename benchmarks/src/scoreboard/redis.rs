//! The Redis side of `pure-bench scoreboard`: a redis-server started with `appendonly yes` and
//! `appendfsync always`, and the scoreboard logic as a Lua script.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context};

use super::wire::{encode_resp, take_resp, Protocol, Resp};
use super::{Args, System};

/// The Redis side of the scoreboard: KEYS[1] the player's hash, KEYS[2] the leaderboard sorted
/// set; ARGV[1] the player, ARGV[2] the score. Returns {best, posts} like POST /scores.
const REDIS_POST_SCRIPT: &str = r#"
local posts = redis.call('HINCRBY', KEYS[1], 'posts', 1)
local best = redis.call('HGET', KEYS[1], 'best')
local score = tonumber(ARGV[2])
if (not best) or score > tonumber(best) then
  redis.call('HSET', KEYS[1], 'best', ARGV[2])
  redis.call('ZADD', KEYS[2], score, ARGV[1])
  best = ARGV[2]
end
return {best, posts}
"#;

/// redis-server, started here with the script loaded.
pub(super) struct Redis {
    pub(super) address: SocketAddr,
    child: Child,
    pub(super) dir: PathBuf,
    pub(super) version: String,
    script_sha: String,
}

impl Redis {
    pub(super) fn start(args: &Args) -> anyhow::Result<Redis> {
        let Some(data) = &args.data else {
            bail!("--vs-redis needs --data DIR (Redis's append-only file goes in DIR/redis)");
        };
        let version = Command::new(&args.redis_server)
            .arg("--version")
            .output()
            .map_err(|_| {
                anyhow!(
                    "--vs-redis: {} is not installed (apt-get install -y redis-server)",
                    args.redis_server.display()
                )
            })?;
        let version = String::from_utf8_lossy(&version.stdout).trim().to_string();
        let dir = data.join("redis");
        if dir.exists() {
            std::fs::remove_dir_all(&dir)?;
        }
        std::fs::create_dir_all(&dir)?;
        let port = free_port()?;
        let child = Command::new(&args.redis_server)
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
            ])
            .args([
                "--appendonly",
                "yes",
                "--appendfsync",
                "always",
                "--daemonize",
                "no",
            ])
            .arg("--dir")
            .arg(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .context("starting redis-server")?;
        let address = SocketAddr::from(([127, 0, 0, 1], port));
        let mut redis = Redis {
            address,
            child,
            dir,
            version,
            script_sha: String::new(),
        };
        let mut connection = redis.wait_until_up()?;
        let sha = connection.call(&[b"SCRIPT", b"LOAD", REDIS_POST_SCRIPT.as_bytes()])?;
        redis.script_sha = match sha {
            Resp::Bulk(Some(sha)) => String::from_utf8(sha)?,
            other => bail!("SCRIPT LOAD answered {other:?}"),
        };
        Ok(redis)
    }

    fn wait_until_up(&self) -> anyhow::Result<RespConnection> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(stream) = TcpStream::connect(self.address) {
                let mut connection = RespConnection::new(stream)?;
                if matches!(connection.call(&[b"PING"]), Ok(Resp::Simple(_))) {
                    return Ok(connection);
                }
            }
            if Instant::now() > deadline {
                bail!(
                    "redis-server did not answer on {} within 10 s",
                    self.address
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl System for Redis {
    fn name(&self) -> &str {
        "redis"
    }

    fn address(&self) -> SocketAddr {
        self.address
    }

    fn protocol(&self) -> Protocol {
        Protocol::Resp {
            script_sha: self.script_sha.clone(),
        }
    }

    fn pid(&self) -> Option<u32> {
        Some(self.child.id())
    }
}

fn free_port() -> anyhow::Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?.port())
}

/// A blocking RESP2 connection for setting Redis up (the load runs on `wire::Wire`).
struct RespConnection {
    stream: TcpStream,
    input: Vec<u8>,
}

impl RespConnection {
    fn new(stream: TcpStream) -> anyhow::Result<RespConnection> {
        stream.set_nodelay(true)?;
        Ok(RespConnection {
            stream,
            input: Vec::new(),
        })
    }

    fn call(&mut self, arguments: &[&[u8]]) -> anyhow::Result<Resp> {
        let mut command = Vec::new();
        encode_resp(&mut command, arguments);
        self.stream.write_all(&command)?;
        let mut chunk = [0u8; 4096];
        loop {
            if let Some(reply) = take_resp(&mut self.input)? {
                return Ok(reply);
            }
            let read = self.stream.read(&mut chunk)?;
            if read == 0 {
                bail!("redis closed the connection");
            }
            self.input.extend_from_slice(&chunk[..read]);
        }
    }
}
