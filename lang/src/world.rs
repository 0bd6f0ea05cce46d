//! What a handler may ask of the world outside its tables: the time (`now()`), fresh ids
//! (`uuid()`) and random numbers (`random(lo, hi)`).
//!
//! None of them can make recovery diverge: recovery applies the logged effects of a write and
//! never runs its script again, so a value drawn once is the value kept.
//!
//! Live, the time is the wall clock and the numbers come from the thread's cryptographically
//! secure generator (`rand::rng()`), so a `uuid()` is fit to be a secret token. A test can fix
//! the time and seed the numbers ([`World::fixed`]): then every run of the same requests, in the
//! same order, answers the same.

use std::cell::Cell;
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use rand::rngs::StdRng;
use rand::{Rng, RngCore, SeedableRng};

/// Where `now()`, `uuid()` and `random()` take their values. One per app, shared by every thread.
#[derive(Debug, Default)]
pub struct World {
    /// A fixed `now()`, in milliseconds since the epoch; `None` reads the wall clock.
    fixed_now: Option<i64>,
    /// A seeded generator shared by every call; `None` uses each thread's secure generator.
    seeded: Option<Mutex<StdRng>>,
}

impl World {
    /// The live world: the wall clock and a secure generator.
    pub fn live() -> World {
        World::default()
    }

    /// A world for tests: `now()` is `now_ms` (when given) and the numbers come from `seed`
    /// (when given), in the order calls draw them.
    pub fn fixed(now_ms: Option<i64>, seed: Option<u64>) -> World {
        World {
            fixed_now: now_ms,
            seeded: seed.map(|s| Mutex::new(StdRng::seed_from_u64(s))),
        }
    }

    pub fn is_live(&self) -> bool {
        self.fixed_now.is_none() && self.seeded.is_none()
    }

    fn clock(&self) -> i64 {
        self.fixed_now.unwrap_or_else(|| {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as i64)
        })
    }

    fn draw<R>(&self, f: impl FnOnce(&mut dyn RngCore) -> R) -> R {
        match &self.seeded {
            Some(rng) => f(&mut *rng.lock().unwrap_or_else(|p| p.into_inner())),
            None => f(&mut rand::rng()),
        }
    }
}

thread_local! {
    /// The running call's `now()`, read on first use: one value for the whole call.
    static NOW: Cell<Option<i64>> = const { Cell::new(None) };
    /// The running call's world (set by `context::install`); null outside a call.
    static WORLD: Cell<*const World> = const { Cell::new(std::ptr::null()) };
}

/// Starts a call in `world`, which must outlive it ([`end_call`] before it goes).
pub(crate) fn begin_call(world: &World) {
    NOW.with(|n| n.set(None));
    WORLD.with(|w| w.set(world));
}

pub(crate) fn end_call() {
    WORLD.with(|w| w.set(std::ptr::null()));
    NOW.with(|n| n.set(None));
}

fn with_world<R>(f: impl FnOnce(&World) -> R) -> Result<R, String> {
    let world = WORLD.with(Cell::get);
    if world.is_null() {
        return Err("now(), uuid() and random() can only be used inside a handler".into());
    }
    // SAFETY: `begin_call` set it from a reference that the caller keeps alive until
    // `end_call`, and a call runs on one thread.
    Ok(f(unsafe { &*world }))
}

/// Registers `now()`, `uuid()` and `random(lo, hi)`; their errors are script errors at the call.
pub(crate) fn register(engine: &mut rhai::Engine) {
    use rhai::EvalAltResult;
    fn fail(message: String) -> Box<EvalAltResult> {
        EvalAltResult::ErrorRuntime(
            rhai::Dynamic::from(crate::api::ApiError(message)),
            rhai::Position::NONE,
        )
        .into()
    }
    engine.register_fn("now", || now().map_err(fail));
    engine.register_fn("uuid", || uuid().map_err(fail));
    engine.register_fn("random", |lo: i64, hi: i64| random(lo, hi).map_err(fail));
}

/// `now()`: milliseconds since the epoch, the same for the whole call.
pub(crate) fn now() -> Result<i64, String> {
    if let Some(now) = NOW.with(Cell::get) {
        return Ok(now);
    }
    let now = with_world(World::clock)?;
    NOW.with(|n| n.set(Some(now)));
    Ok(now)
}

/// `random(lo, hi)`: an integer in `lo..=hi`.
pub(crate) fn random(lo: i64, hi: i64) -> Result<i64, String> {
    if lo > hi {
        return Err(format!(
            "random: the low end ({lo}) is above the high end ({hi})"
        ));
    }
    with_world(|world| world.draw(|rng| rng.random_range(lo..=hi)))
}

/// `uuid()`: a version 7 UUID (RFC 9562), time-ordered across milliseconds: the call's
/// `now()` in its first 48 bits, then 74 random bits.
pub(crate) fn uuid() -> Result<String, String> {
    let now = now()?;
    let random: u128 = with_world(|world| world.draw(|rng| rng.random()))?;
    let mut bits = (now as u128 & ((1 << 48) - 1)) << 80;
    bits |= 0x7 << 76; // version 7
    bits |= (random >> 54 & 0xfff) << 64; // rand_a, 12 bits
    bits |= 0b10 << 62; // the variant
    bits |= random & ((1 << 62) - 1); // rand_b, 62 bits
    let hex = format!("{bits:032x}");
    Ok(format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fixed_world_answers_the_same_and_a_uuid_has_its_shape() {
        let draw = || {
            let world = World::fixed(Some(1_700_000_000_123), Some(7));
            begin_call(&world);
            let values = (now(), uuid(), uuid(), random(1, 6), random(-3, -3));
            end_call();
            values
        };
        let (a, b) = (draw(), draw());
        assert_eq!(a, b, "the same seed and clock give the same values");
        assert_eq!(a.0, Ok(1_700_000_000_123));
        assert_ne!(a.1, a.2, "two uuids differ");
        assert_eq!(a.4, Ok(-3));
        let id = a.1.expect("a uuid");
        assert_eq!(id.len(), 36);
        assert_eq!(&id[..13], "018bcfe5-687b", "the time in the first 48 bits");
        assert_eq!(&id[14..15], "7", "version 7");
        assert!("89ab".contains(&id[19..20]), "the RFC variant: {id}");
        assert!((1..=6).contains(&a.3.expect("a number")));
    }

    #[test]
    fn now_is_one_value_for_a_call_and_nothing_outside_one() {
        let world = World::live();
        begin_call(&world);
        let first = now().expect("in a call");
        std::thread::sleep(std::time::Duration::from_millis(3));
        assert_eq!(now(), Ok(first));
        end_call();
        assert!(now().is_err(), "outside a call");
        begin_call(&world);
        std::thread::sleep(std::time::Duration::from_millis(3));
        assert!(
            now().expect("in a call") > first,
            "the next call reads the clock again"
        );
        end_call();
        assert!(random(1, 2).is_err(), "outside a call");
        assert!(World::live().is_live());
    }

    #[test]
    fn a_random_range_must_be_in_order() {
        let world = World::fixed(None, Some(1));
        begin_call(&world);
        assert!(random(2, 1).unwrap_err().contains("above"));
        let all = (0..2000).map(|_| random(0, 3).expect("a number"));
        let mut seen = [false; 4];
        for n in all {
            seen[n as usize] = true;
        }
        assert_eq!(seen, [true; 4], "every value of the range comes up");
        end_call();
    }
}
