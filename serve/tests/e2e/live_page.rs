//! The holds example's page in a real browser: Debian's `chromium`, headless, driven through
//! `chromedriver`'s WebDriver API (plain HTTP and JSON). The page loads from `pure-serve`'s
//! `public/` folder and shows the seats through the browser's own `EventSource`; a write made
//! from outside appears on it; a click on it makes a write with `fetch`; after a kill -9 and a
//! restart of the server, its `EventSource` reconnects and shows the current state. Without
//! the browser (`.ci/run` installs it) the test says so and is skipped.

use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::harness::{repo_path, wait_until, Client, Launch, WAIT_MAX};

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("address")
        .port()
}

/// A headless chromium session behind a chromedriver of its own.
struct Browser {
    driver: Child,
    client: Client,
    session: String,
}

impl Browser {
    fn open() -> Browser {
        let port = free_port();
        let driver = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromedriver");
        let address: SocketAddr = format!("127.0.0.1:{port}").parse().expect("address");
        let mut client = Client::connect(address);
        wait_until("chromedriver to listen", || {
            client
                .request("GET", "/status", None)
                .is_ok_and(|answer| answer.json()["value"]["ready"] == json!(true))
        });
        let mut browser = Browser {
            driver,
            client,
            session: String::new(),
        };
        let capabilities = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": CHROMIUM,
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                         "--disable-dev-shm-usage"],
            },
        }}});
        let session = browser.command("POST", "/session", Some(capabilities));
        browser.session = session["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("a session: {session}"))
            .to_string();
        browser
    }

    fn command(&mut self, method: &str, path: &str, body: Option<Value>) -> Value {
        let body = body.map(|b| serde_json::to_vec(&b).expect("json"));
        let answer = self
            .client
            .request(method, path, body.as_deref())
            .expect("chromedriver answers");
        let value = answer.json()["value"].clone();
        assert_eq!(answer.status, 200, "{method} {path}: {value}");
        value
    }

    fn go(&mut self, url: &str) {
        let path = format!("/session/{}/url", self.session);
        self.command("POST", &path, Some(json!({ "url": url })));
    }

    /// The value of a script run in the page (`return ...`).
    fn eval(&mut self, script: &str) -> Value {
        let path = format!("/session/{}/execute/sync", self.session);
        self.command("POST", &path, Some(json!({ "script": script, "args": [] })))
    }

    /// The seats as the page shows them: one text per seat, in order.
    fn seats(&mut self) -> Vec<String> {
        let shown = self
            .eval("return [...document.querySelectorAll('.seat')].map((seat) => seat.textContent)");
        shown
            .as_array()
            .map(|seats| {
                seats
                    .iter()
                    .map(|s| s.as_str().unwrap_or("").to_string())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Waits until the page shows `text` for seat `seat`; how long that took.
    fn wait_for_seat(&mut self, seat: usize, text: &str) -> Duration {
        let started = Instant::now();
        loop {
            if self.seats().get(seat - 1).map(String::as_str) == Some(text) {
                return started.elapsed();
            }
            assert!(
                started.elapsed() < WAIT_MAX,
                "the page never showed seat {seat} as {text:?}: {:?}",
                self.seats()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            let path = format!("/session/{}", self.session);
            let _ = self.client.request("DELETE", &path, None);
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

fn hold(client: &mut Client, seat: u64, who: &str) -> Value {
    let answer = client.post("/holds", &json!({"seat": seat, "who": who}));
    assert_eq!(answer.status, 200, "{}", answer.text());
    answer.json()
}

#[test]
fn the_holds_page_shows_writes_live_and_reconnects_after_a_kill_9() {
    if !Path::new(CHROMIUM).exists() || !Path::new(CHROMEDRIVER).exists() {
        eprintln!(
            "SKIPPED the_holds_page_shows_writes_live_and_reconnects_after_a_kill_9: {CHROMIUM} \
             or {CHROMEDRIVER} is not installed (Debian's chromium and chromium-driver: .ci/run \
             installs them)"
        );
        return;
    }
    let data = tempfile::tempdir().expect("tempdir");
    // A fixed port: the page's EventSource reconnects to the address it came from.
    let port = free_port();
    let launch = Launch::new(&repo_path("apps/holds"), data.path())
        .flag("--listen", &format!("127.0.0.1:{port}"));
    let mut server = launch.start();
    let mut browser = Browser::open();
    browser.go(&format!("http://127.0.0.1:{port}/"));
    wait_until("the page to show twelve seats", || {
        browser.seats().len() == 12
    });
    assert_eq!(browser.seats()[2], "3");

    // A write from outside appears on the page by itself.
    let mut client = server.client();
    hold(&mut client, 3, "ada");
    let took = browser.wait_for_seat(3, "3 held (ada)");
    eprintln!("live page: a hold from outside showed on the page after {took:?}");
    assert!(took < Duration::from_secs(5), "shown after {took:?}");

    // A click on the page holds a seat through fetch.
    browser.eval("document.getElementById('who').value = 'page'; return true");
    browser.eval("document.querySelector('[data-seat=\"4\"]').click(); return true");
    wait_until("the click's hold to be durable", || {
        client.get("/seats").json()[3] == json!({"seat": 4, "state": "held", "who": "page"})
    });
    browser.wait_for_seat(4, "4 held (page)");

    // Killed and restarted: the page reconnects and shows the state as it is now.
    server.signal(libc::SIGKILL);
    server.wait();
    let mut server = launch.start();
    let mut client = server.client();
    hold(&mut client, 9, "bea");
    let took = browser.wait_for_seat(9, "9 held (bea)");
    eprintln!("live page: after the restart, the page showed the new hold after {took:?}");
    assert_eq!(
        browser.seats()[2],
        "3 held (ada)",
        "what was durable is still shown"
    );
    let status = browser.eval("return document.getElementById('status').textContent");
    assert!(
        status.as_str().is_some_and(|s| s.starts_with("live")),
        "{status}"
    );
    drop(browser);
    server.signal(libc::SIGTERM);
    assert!(server.wait().success());
}
