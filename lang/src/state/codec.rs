//! The durable encoding of a stored value and of a row's fields: what records and checkpoint
//! images embed, and what a packed row ([`crate::Fields`]) keeps for arrays and maps.
//!
//! ```text
//! value   := UNIT | FALSE | TRUE | INT zigzag:varint | FLOAT f64-le | STR str
//!          | ARRAY n:varint value^n | MAP n:varint (str value)^n
//! str     := len:varint utf-8 bytes
//! varint  := LEB128, at most 10 bytes, the 10th at most 1 (no silent overflow)
//! ```
//!
//! This module knows values, not records: the framing of changes, keys and schemas is the
//! runtime's (`pure_runtime::record`).

use rhai::{Array, Dynamic, ImmutableString, Map};

use crate::state::depth::{too_deep, DEPTH_MAX};

pub const UNIT: u8 = 0;
pub const FALSE: u8 = 1;
pub const TRUE: u8 = 2;
pub const INT: u8 = 3;
pub const FLOAT: u8 = 4;
pub const STR: u8 = 5;
pub const ARRAY: u8 = 6;
pub const MAP: u8 = 7;

#[inline]
pub fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    // Room for the longest first (ten bytes), then the bytes written with no check each.
    out.reserve(10);
    let len = out.len();
    let mut n = 0;
    // SAFETY: at most ten bytes are written, within the capacity reserved, and all of them are
    // initialised before the length covers them.
    unsafe {
        let at = out.as_mut_ptr().add(len);
        while value >= 0x80 {
            at.add(n).write(value as u8 | 0x80);
            value >>= 7;
            n += 1;
        }
        at.add(n).write(value as u8);
        out.set_len(len + n + 1);
    }
}

pub fn zigzag(value: i64) -> u64 {
    ((value << 1) ^ (value >> 63)) as u64
}

pub fn unzigzag(z: u64) -> i64 {
    (z >> 1) as i64 ^ -((z & 1) as i64)
}

#[inline]
pub fn put_int(out: &mut Vec<u8>, value: i64) {
    put_varint(out, zigzag(value));
}

pub fn put_str(out: &mut Vec<u8>, s: &str) {
    put_varint(out, s.len() as u64);
    out.extend_from_slice(s.as_bytes());
}

/// Encodes a stored value. Only storable values reach here (the API checks on every set), so
/// the recursion is at most [`DEPTH_MAX`] deep.
pub fn put_value(out: &mut Vec<u8>, value: &Dynamic) {
    if value.is_unit() {
        out.push(UNIT);
    } else if let Ok(b) = value.as_bool() {
        out.push(if b { TRUE } else { FALSE });
    } else if let Ok(i) = value.as_int() {
        out.push(INT);
        put_int(out, i);
    } else if let Ok(f) = value.as_float() {
        out.push(FLOAT);
        out.extend_from_slice(&f.to_le_bytes());
    } else if let Some(s) = value.read_lock::<ImmutableString>() {
        out.push(STR);
        put_str(out, &s);
    } else if let Some(items) = value.read_lock::<Array>() {
        out.push(ARRAY);
        put_varint(out, items.len() as u64);
        items.iter().for_each(|v| put_value(out, v));
    } else if let Some(map) = value.read_lock::<Map>() {
        out.push(MAP);
        put_varint(out, map.len() as u64);
        for (k, v) in map.iter() {
            put_str(out, k);
            put_value(out, v);
        }
    } else {
        panic!(
            "a value of type {} reached the log: the API admits only storable values",
            value.type_name()
        );
    }
}

/// A reader over encoded bytes; every method fails on truncated or malformed input.
pub struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    pub fn new(bytes: &'a [u8]) -> Reader<'a> {
        Reader { bytes, at: 0 }
    }

    pub fn is_empty(&self) -> bool {
        self.at >= self.bytes.len()
    }

    pub fn position(&self) -> usize {
        self.at
    }

    /// The bytes read since `start`, a position of this reader.
    pub fn since(&self, start: usize) -> &'a [u8] {
        &self.bytes[start..self.at]
    }

    /// The next byte, not consumed.
    pub fn peek(&self) -> Result<u8, String> {
        Ok(*self.bytes.get(self.at).ok_or("unexpected end")?)
    }

    pub fn byte(&mut self) -> Result<u8, String> {
        let b = *self.bytes.get(self.at).ok_or("unexpected end")?;
        self.at += 1;
        Ok(b)
    }

    pub fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self
            .at
            .checked_add(n)
            .filter(|e| *e <= self.bytes.len())
            .ok_or("unexpected end")?;
        let slice = &self.bytes[self.at..end];
        self.at = end;
        Ok(slice)
    }

    pub fn varint(&mut self) -> Result<u64, String> {
        let mut value = 0u64;
        for i in 0..10 {
            let b = self.byte()?;
            if i == 9 && b > 1 {
                return Err("varint overflows 64 bits".into());
            }
            value |= u64::from(b & 0x7f) << (7 * i);
            if b < 0x80 {
                return Ok(value);
            }
        }
        Err("varint too long".into())
    }

    /// A count of items that each take at least one byte (bounds allocations on damaged input).
    pub fn count(&mut self) -> Result<usize, String> {
        let n = self.varint()?;
        if n > (self.bytes.len() - self.at) as u64 {
            return Err(format!("count {n} exceeds the remaining bytes"));
        }
        Ok(n as usize)
    }

    pub fn int(&mut self) -> Result<i64, String> {
        Ok(unzigzag(self.varint()?))
    }

    pub fn str(&mut self) -> Result<&'a str, String> {
        let n = self.count()?;
        std::str::from_utf8(self.take(n)?).map_err(|e| e.to_string())
    }

    /// The bytes of the value that starts here, checked, without building it. `enclosing`: the
    /// arrays and maps around it (0 for a field's value).
    pub fn skip_value(&mut self, enclosing: usize) -> Result<&'a [u8], String> {
        let start = self.at;
        match self.byte()? {
            UNIT | FALSE | TRUE => {}
            INT => {
                self.varint()?;
            }
            FLOAT => {
                self.take(8)?;
            }
            STR => {
                self.str()?;
            }
            ARRAY => {
                nest(enclosing)?;
                for _ in 0..self.count()? {
                    self.skip_value(enclosing + 1)?;
                }
            }
            MAP => {
                nest(enclosing)?;
                for _ in 0..self.count()? {
                    self.str()?;
                    self.skip_value(enclosing + 1)?;
                }
            }
            tag => return Err(format!("bad value tag {tag}")),
        }
        Ok(&self.bytes[start..self.at])
    }

    /// The value that starts here. `enclosing`: the arrays and maps around it (0 for a field's
    /// value).
    pub fn value(&mut self, enclosing: usize) -> Result<Dynamic, String> {
        Ok(match self.byte()? {
            UNIT => Dynamic::UNIT,
            FALSE => Dynamic::FALSE,
            TRUE => Dynamic::TRUE,
            INT => Dynamic::from_int(self.int()?),
            FLOAT => {
                let bytes: [u8; 8] = self.take(8)?.try_into().expect("took 8 bytes");
                Dynamic::from_float(f64::from_le_bytes(bytes))
            }
            STR => Dynamic::from(ImmutableString::from(self.str()?)),
            ARRAY => {
                nest(enclosing)?;
                let n = self.count()?;
                let items = (0..n)
                    .map(|_| self.value(enclosing + 1))
                    .collect::<Result<Array, _>>()?;
                Dynamic::from_array(items)
            }
            MAP => {
                nest(enclosing)?;
                let n = self.count()?;
                let mut map = Map::new();
                for _ in 0..n {
                    let k = self.str()?;
                    map.insert(k.into(), self.value(enclosing + 1)?);
                }
                Dynamic::from_map(map)
            }
            tag => return Err(format!("bad value tag {tag}")),
        })
    }
}

/// Refuses an array or map with `enclosing` others around it if it would be deeper than
/// [`DEPTH_MAX`]: nothing stored is (the API checks every value), so this is damage, and it
/// bounds the decoder's recursion on damaged input.
fn nest(enclosing: usize) -> Result<(), String> {
    if enclosing >= DEPTH_MAX {
        return Err(too_deep("a value"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip_and_overflow_is_refused() {
        for v in [
            0,
            1,
            127,
            128,
            300,
            u64::from(u32::MAX),
            u64::MAX - 1,
            u64::MAX,
        ] {
            let mut out = Vec::new();
            put_varint(&mut out, v);
            assert!(out.len() <= 10);
            let mut r = Reader::new(&out);
            assert_eq!(r.varint(), Ok(v));
            assert!(r.is_empty());
        }
        // u64::MAX's 10th byte is 1; a 2 there would be a 65th bit.
        let mut out = Vec::new();
        put_varint(&mut out, u64::MAX);
        out[9] = 2;
        assert!(Reader::new(&out).varint().is_err());
        assert!(Reader::new(&[0x80; 11]).varint().is_err());
        for v in [0, -1, 1, i64::MIN, i64::MAX] {
            assert_eq!(unzigzag(zigzag(v)), v);
        }
    }

    /// The decoder reads exactly the values the depth rule allows: a damaged record or image
    /// nested deeper is refused, not followed down.
    #[test]
    fn the_decoder_follows_the_depth_rule() {
        // `levels` arrays, each holding the next, the innermost empty.
        let nested = |levels: usize| {
            let mut bytes = Vec::new();
            for level in 1..=levels {
                bytes.extend_from_slice(&[ARRAY, u8::from(level < levels)]);
            }
            bytes
        };
        let deepest = nested(DEPTH_MAX);
        assert!(Reader::new(&deepest).value(0).is_ok());
        assert_eq!(
            Reader::new(&deepest).skip_value(0).map(<[u8]>::len),
            Ok(deepest.len())
        );
        let deeper = nested(DEPTH_MAX + 1);
        let refused = Reader::new(&deeper).value(0).expect_err("one level more");
        assert!(refused.contains("more than 128 levels"), "{refused}");
        assert!(Reader::new(&deeper).skip_value(0).is_err());
        let mut map = vec![MAP, 1];
        put_str(&mut map, "k");
        map.extend_from_slice(&nested(DEPTH_MAX));
        assert!(Reader::new(&map).value(0).is_err());
        assert!(Reader::new(&map).skip_value(0).is_err());
    }
}
