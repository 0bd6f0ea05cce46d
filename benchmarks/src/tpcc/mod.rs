//! TPC-C: one population and one request stream for every engine (`population`, `input`, drawn
//! from `rng`), the rows they share (`rows`), the SQLite twin of the app (`sqlite`), the
//! consistency conditions (`check`) and the equality run (`equal`).

pub mod input;
pub mod population;
pub mod rng;
pub mod rows;

/// A transaction's answer as the app gives it: the HTTP status and the JSON body. The SQLite
/// twin answers the same shapes, so that an equality run compares answers as well as tables.
#[derive(Clone, Debug, PartialEq)]
pub struct Answer {
    pub status: u16,
    pub body: serde_json::Value,
}
