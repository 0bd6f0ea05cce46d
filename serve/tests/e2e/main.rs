//! End-to-end tests of pure-serve: the built binary, real HTTP on loopback, real disks.
//!
//! One test binary with a module per promise: the scoreboard's API contract, the error statuses,
//! the limits that protect the server, concurrency and read-your-writes, shutdown and crashes, and
//! runaway scripts. Randomized tests print their seed (`PURE_TEST_SEED` replays one);
//! `PURE_TEST_SCALE` multiplies the work of the heavier ones.

mod admin;
mod browsers;
mod concurrency;
mod cors;
mod crash;
mod depth;
mod errors;
mod harness;
mod heads;
mod hostile;
mod kv;
mod ledger;
mod limits;
mod live;
mod live_page;
mod logs;
mod public;
mod readers;
mod reload;
mod request_response;
mod reviewed_041;
mod runaway;
mod schedules;
mod scoreboard;
mod transcripts;
mod transfer;
mod world;
