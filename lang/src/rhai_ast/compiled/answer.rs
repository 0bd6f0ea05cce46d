//! Answers written once: a handler's answer as JSON text, made as the handler runs, with no map
//! built, walked for the size limits, written and dropped.
//!
//! Two forms, each decided by the compiler for a handler it can see whole:
//! - A map literal in the handler's return position (its last statement, or a `return`) is
//!   written straight to text, its keys' text made once at compile time ([`LiteralKeys`]), in
//!   the order the map would have had (a Rhai map is ordered by key: the template's order).
//! - A local that starts as `[]` and is only ever pushed map literals (`lines.push(#{..})`) and
//!   given as a value of such an answer is an [`AnswerList`]: each push writes its item's text.
//!
//! Both exist only in a handler called as the handler (the frame's depth is 1): called from
//! another function, the same code builds maps and arrays as before. No other code ever sees
//! these values: the compiler proved that no other code names the local, and the answer leaves
//! the call as it is. The size limits are counted as for the map and array they stand for
//! (`ops::Sizes`), and a value with no JSON form sends the call to Rhai, which reports it.

use rhai::Dynamic;

use super::ops::Sizes;
use super::{Env, Stop};
use crate::script::json::{self, Json};

/// The handler's answer, already written (see the module doc).
#[derive(Clone)]
pub(crate) struct WrittenAnswer(pub Json);

/// An array of maps, as the text of its items (see the module doc).
#[derive(Clone)]
pub(crate) struct AnswerList {
    /// `[` and the items written so far, comma-separated.
    text: Json,
    /// What the array holds, as the size limits count it.
    sizes: Sizes,
}

impl AnswerList {
    pub(crate) fn new() -> AnswerList {
        let mut text = Json::empty();
        text.put(b"[");
        AnswerList {
            text,
            sizes: Sizes::default(),
        }
    }

    /// Pushes a map literal's item: its values in the keys' order. The array is at depth 1 of
    /// the answer, its items at 2.
    pub(crate) fn push(
        &mut self,
        keys: &LiteralKeys,
        values: &[Dynamic],
        env: &Env,
    ) -> Result<(), Stop> {
        // As the array's push would be checked: the item as a map literal, then the array.
        let item = keys.sizes(values).within(env.limits)?;
        let sizes = self.sizes.pushed(item).within(env.limits)?;
        // Past the `[`, an item written before.
        if self.text.len() > 1 {
            self.text.put(b",");
        }
        keys.write(&mut self.text, values, env, 2)?;
        self.sizes = sizes;
        Ok(())
    }

    /// What the array holds, as the size limits count it.
    pub(crate) fn sizes(&self) -> Sizes {
        self.sizes
    }

    /// The array's text, closed.
    fn close(&self, out: &mut Json) {
        out.append(&self.text);
        out.put(b"]");
    }
}

/// The keys of a map literal as the text each is written with, in the map's order.
pub(crate) struct LiteralKeys {
    /// `"name":`, with a `,` before every key but the first.
    texts: Vec<Vec<u8>>,
}

impl LiteralKeys {
    pub(crate) fn new<'a>(names: impl Iterator<Item = &'a str>) -> LiteralKeys {
        let texts = names
            .enumerate()
            .map(|(n, name)| {
                let mut text = Json::empty();
                if n > 0 {
                    text.put(b",");
                }
                json::string(&mut text, name);
                text.put(b":");
                text.to_bytes()
            })
            .collect();
        LiteralKeys { texts }
    }

    /// What a map of these keys and `values` holds, as the size limits count it.
    pub(crate) fn sizes(&self, values: &[Dynamic]) -> Sizes {
        let parts = values
            .iter()
            .fold(Sizes::default(), |sum, v| sum.plus(Sizes::of(v)));
        Sizes::map_of(self.texts.len(), parts)
    }

    /// Writes the map, `values` in the keys' order, the map at `depth` of the answer.
    pub(crate) fn write(
        &self,
        out: &mut Json,
        values: &[Dynamic],
        env: &Env,
        depth: usize,
    ) -> Result<(), Stop> {
        debug_assert_eq!(self.texts.len(), values.len(), "a value for every key");
        out.put(b"{");
        for (key, value) in self.texts.iter().zip(values) {
            out.put(key);
            match value.read_lock::<AnswerList>() {
                Some(list) => list.close(out),
                None => {
                    json::write(out, value, env.schema, depth + 1).map_err(|_| Stop::Fallback)?
                }
            }
        }
        out.put(b"}");
        Ok(())
    }
}

/// The answer of a map literal in return position, `values` in the keys' order, `sizes` what
/// they hold together: written, with the size limits checked as for the map.
pub(crate) fn written(
    keys: &LiteralKeys,
    values: &[Dynamic],
    sizes: Sizes,
    env: &Env,
) -> Result<Dynamic, Stop> {
    Sizes::map_of(values.len(), sizes).within(env.limits)?;
    let mut out = Json::empty();
    keys.write(&mut out, values, env, 0)?;
    Ok(Dynamic::from(WrittenAnswer(out)))
}
