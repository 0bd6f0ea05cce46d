//! A set of integers for scripts: `int_set()` makes an empty one; `set.insert(n)` adds `n` and
//! says whether it was new, `set.contains(n)` (and `n in set`) whether it is there, `set.len()`
//! how many it holds. It answers as an array of its integers in ascending order.
//!
//! A script that needs a set of integers otherwise keys a map by their text (`seen["${id}"]`),
//! formatting each integer and comparing strings: TPC-C's Stock-Level spent half its call so
//! (research note 028). The size limits do not see inside a custom type, so a set holds at most
//! as many integers as an array may hold items (`array_items_max`).

use std::collections::BTreeSet;

use rhai::{Engine, EvalAltResult, NativeCallContext};

/// Invariant: holds at most the handlers' `array_items_max` integers (checked by `insert`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IntSet(BTreeSet<i64>);

impl IntSet {
    /// Adds `n`; true when it was not there. Refused when the set is full (`max` integers) and
    /// `n` is new.
    pub(crate) fn insert(&mut self, n: i64, max: usize) -> Result<bool, String> {
        if self.0.len() >= max && !self.0.contains(&n) {
            return Err(format!(
                "insert: a set holds at most {max} integers (the handlers' limit array_items)"
            ));
        }
        Ok(self.0.insert(n))
    }

    pub(crate) fn contains(&self, n: i64) -> bool {
        self.0.contains(&n)
    }

    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    /// Its integers, ascending.
    pub(crate) fn iter(&self) -> impl Iterator<Item = i64> + '_ {
        self.0.iter().copied()
    }
}

pub(crate) fn register(engine: &mut Engine) {
    engine.register_type_with_name::<IntSet>("IntSet");
    engine.register_fn("int_set", IntSet::default);
    engine.register_fn(
        "insert",
        |context: NativeCallContext,
         set: &mut IntSet,
         n: i64|
         -> Result<bool, Box<EvalAltResult>> {
            let max = match context.engine().max_array_size() {
                0 => usize::MAX,
                max => max,
            };
            // The API's error (a 500 at the call's line), not a plain string: that is what
            // `throw "..."` raises, the script's refusal of the request (a 400).
            set.insert(n, max)
                .map_err(crate::script::api_error::api_error)
        },
    );
    engine.register_fn("contains", |set: &mut IntSet, n: i64| set.contains(n));
    engine.register_fn("len", |set: &mut IntSet| set.len() as i64);
}
