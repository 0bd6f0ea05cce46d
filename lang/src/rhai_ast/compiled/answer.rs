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
//!
//! A literal whose values are all [`Piece`]s (locals, a local's property, operators on those:
//! values that change nothing and can only fail by sending the call to Rhai) is written with
//! no value made at all: each piece is read where it lies as its key comes (a row's integer or
//! string straight from its packed slot), so the order they are read in cannot matter.

use rhai::Dynamic;

use super::ops::{self, Property, Sizes};
use super::pure::IntExpr;
use super::{Env, Frame, Stop};
use crate::script::api::Row;
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
        // Room for a few items of a few fields (TPC-C's New-Order writes about 1,400 bytes):
        // growing from 128 bytes took six copies of the text.
        let mut text = Json::with_room(LIST_ROOM);
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

    /// [`AnswerList::push`] for a literal of [`Piece`]s (in the keys' order), read from `f`.
    /// The list is out of its local meanwhile (the compiler made sure no piece reads it). A
    /// stop ends the call (no `try` is compiled), so a list left half-written is never seen.
    pub(crate) fn push_pieces(
        &mut self,
        keys: &LiteralKeys,
        pieces: &[Piece],
        f: &mut Frame,
    ) -> Result<(), Stop> {
        if self.text.len() > 1 {
            self.text.put(b",");
        }
        let item = keys
            .write_pieces(&mut self.text, pieces, f, 2)?
            .within(f.env.limits)?;
        self.sizes = self.sizes.pushed(item).within(f.env.limits)?;
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

/// The bytes an [`AnswerList`] has room for before it grows.
const LIST_ROOM: usize = 2048;

/// The keys of a map literal as the text each is written with, in the map's order.
pub(crate) struct LiteralKeys {
    /// `"name":`, with a `,` before every key but the first.
    texts: Vec<Vec<u8>>,
    /// Their bytes together.
    text_len: usize,
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
            .collect::<Vec<_>>();
        let text_len = texts.iter().map(Vec::len).sum();
        LiteralKeys { texts, text_len }
    }

    /// What a map of these keys and `values` holds, as the size limits count it.
    pub(crate) fn sizes(&self, values: &[Dynamic]) -> Sizes {
        let parts = values
            .iter()
            .fold(Sizes::default(), |sum, v| sum.plus(Sizes::of(v)));
        Sizes::map_of(self.texts.len(), parts)
    }

    /// Writes the map of `pieces` (in the keys' order) at `depth` of the answer; returns what
    /// it holds, as the limits count it.
    fn write_pieces(
        &self,
        out: &mut Json,
        pieces: &[Piece],
        f: &mut Frame,
        depth: usize,
    ) -> Result<Sizes, Stop> {
        debug_assert_eq!(self.texts.len(), pieces.len(), "a piece for every key");
        out.put(b"{");
        let mut sizes = Sizes::default();
        for (key, piece) in self.texts.iter().zip(pieces) {
            out.put(key);
            sizes = sizes.plus(piece.write(out, f, depth + 1)?);
        }
        out.put(b"}");
        Ok(Sizes::map_of(pieces.len(), sizes))
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

/// A value of a map literal written with nothing made (see the module doc): each is read when
/// its key is written, in the keys' order, which may not be the literal's.
pub(crate) enum Piece {
    /// A local, read in place.
    Local(usize),
    /// A local that may be an answer's list: its text when it is one (its last use), the
    /// value otherwise.
    List(usize),
    /// `local.name`: a row's field from its packed slot; any other value's property as the
    /// general way reads it.
    Field(usize, Property),
    /// An operator on pieces, or a constant: an integer kept out of a `Dynamic`.
    Int(IntExpr),
}

impl Piece {
    /// Writes the piece at `depth` of the answer; returns what it holds, as the limits count.
    fn write(&self, out: &mut Json, f: &mut Frame, depth: usize) -> Result<Sizes, Stop> {
        match self {
            Piece::Local(slot) => {
                let value = f.local_ref(*slot);
                if let Ok(i) = value.as_int() {
                    json::int(out, i);
                    return Ok(Sizes::default());
                }
                let sizes = f.known_sizes(*slot);
                let sizes = sizes.unwrap_or_else(|| Sizes::of(value));
                value_text(out, value, f.env, depth)?;
                Ok(sizes)
            }
            Piece::List(slot) => {
                if let Some(list) = f.local_ref(*slot).read_lock::<AnswerList>() {
                    list.close(out);
                    return Ok(list.sizes());
                }
                Piece::Local(*slot).write(out, f, depth)
            }
            Piece::Field(slot, property) => {
                let env = f.env;
                let target = f.local_ref(*slot);
                match target.read_lock::<Row>() {
                    Some(row) if !property.is_key => {
                        field_text(out, &row, ops::row_slot(property, row.table)?, env, depth)
                    }
                    _ => {
                        let value = ops::get_property(target, property, env)?;
                        let sizes = Sizes::of(&value).within(env.limits)?;
                        value_text(out, &value, env, depth)?;
                        Ok(sizes)
                    }
                }
            }
            Piece::Int(code) => match code.eval(f)? {
                Ok(i) => {
                    json::int(out, i);
                    Ok(Sizes::default())
                }
                Err(value) => {
                    let sizes = Sizes::of(&value);
                    value_text(out, &value, f.env, depth)?;
                    Ok(sizes)
                }
            },
        }
    }
}

/// A row's field as [`ops::get_property`] reads it and `json::write` writes it, without the
/// value when it is an integer or a string as read.
fn field_text(
    out: &mut Json,
    row: &Row,
    slot: usize,
    env: &Env,
    depth: usize,
) -> Result<Sizes, Stop> {
    if let Some(i) = row.int(slot) {
        json::int(out, i);
        return Ok(Sizes::default());
    }
    if let Some(text) = row.str(slot) {
        let sizes = Sizes::text(text.len()).within(env.limits)?;
        json::string(out, text);
        return Ok(sizes);
    }
    let value = row.get(slot);
    let sizes = Sizes::of(&value).within(env.limits)?;
    value_text(out, &value, env, depth)?;
    Ok(sizes)
}

/// A value of an answer at `depth`: an answer's list as its text.
fn value_text(out: &mut Json, value: &Dynamic, env: &Env, depth: usize) -> Result<(), Stop> {
    match value.read_lock::<AnswerList>() {
        Some(list) => {
            list.close(out);
            Ok(())
        }
        None => json::write(out, value, env.schema, depth).map_err(|_| Stop::Fallback),
    }
}

/// [`written`] for a literal of [`Piece`]s, in the keys' order, read from `f`.
pub(crate) fn written_pieces(
    keys: &LiteralKeys,
    pieces: &[Piece],
    f: &mut Frame,
) -> Result<Dynamic, Stop> {
    // Room for the lists' text, and a few bytes for each key and value.
    let lists: usize = pieces
        .iter()
        .filter_map(|piece| match piece {
            Piece::List(slot) => f
                .local_ref(*slot)
                .read_lock::<AnswerList>()
                .map(|l| l.text.len()),
            _ => None,
        })
        .sum();
    let mut out = Json::with_room(lists + keys.text_len + 24 * pieces.len());
    let sizes = keys.write_pieces(&mut out, pieces, f, 0)?;
    sizes.within(f.env.limits)?;
    Ok(Dynamic::from(WrittenAnswer(out)))
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
    let mut out = Json::with_room(keys.text_len + 24 * values.len());
    keys.write(&mut out, values, env, 0)?;
    Ok(Dynamic::from(WrittenAnswer(out)))
}
