//! Rhai's functions that recurse through the engine, a native call per level of a value, put
//! behind the depth rule.
//!
//! Rhai makes an array or a map into text (`print`, `debug`, `to_string`, `to_debug`; and so
//! `${}` and `+` on a string, which call `to_string`) by calling `to_debug` on each element
//! through the engine, and compares two of them (`==`, `!=`; and so `in`, `contains`,
//! `index_of` and `dedup`, which call `==`) by calling `==` on each pair of elements. An
//! element that is an array or a map is one more native call inside the last, 1.6 to 1.7 KB of
//! native stack in a release build: a value a handler nested 6,000 levels deep overflowed an
//! 8 MiB thread and aborted the server (issue 36). No other function of Rhai 1.27's packages
//! calls through the engine per level: the others that call functions call the script's own
//! (`map`, `sort`, `reduce`...), or call these once per element.
//!
//! The functions here take the place of Rhai's for arrays and maps: they are registered in the
//! engine's own namespace, which Rhai searches before its packages. Each is Rhai's code
//! (`format_array`, `format_map` and `print_with_func` in string_basic.rs, `equals` in
//! array_basic.rs and map_basic.rs), with the rule's check where Rhai starts to recurse, and
//! with elements still made into text or compared through the engine: a value within the rule
//! gives exactly what Rhai gives, and the cost of the check is a walk that stops at 129 levels.
//!
//! Past the rule, the call fails with an error naming the rule. Rhai ignores an error of
//! `to_string` in `${}` and in `+` on a string, and one of `to_debug` in making an array or a
//! map into text (as `debug_text` here does), and then makes the value into text itself,
//! recursing natively (about 270 bytes a level: deep enough, an overflow too); `dedup` takes
//! an error of `==` for "not equal". So those two give an empty text instead, and each of these
//! functions notes a value too deep in the call's context (`context::note_too_deep`): the
//! engine stops the call at its next operation, which comes before any other function call,
//! and the call ends with that error, which a `catch` does not see.
//!
//! `to_json` on a map (Rhai's serde_json text of it, which recurses natively) is given the
//! rule's check before it runs, and `parse_json` reads text as a request body is read: counted against
//! the rule, then parsed (Rhai's refused text 128 levels deep, which the rule allows).
//!
//! Only the outermost of these calls on a thread walks its values: the others run inside it,
//! on parts of those values (the functions they call through the engine, `to_debug` and `==`
//! on elements, Rhai's and Pure's, run no script). So the check costs one walk whatever the
//! depth, and the calls nest at most `DEPTH_MAX` deep, which is also enforced.

use std::cell::Cell;
use std::fmt::Write;

use rhai::{
    Array, Dynamic, Engine, EvalAltResult, ImmutableString, Map, NativeCallContext, FUNC_TO_DEBUG,
    OP_EQUALS,
};

use crate::script::api_error::api_error;
use crate::state::depth::{entries_within, items_within, too_deep, DEPTH_MAX};

type Fallible<T> = Result<T, Box<EvalAltResult>>;

/// What the error names (the subject of `depth::too_deep`'s sentence).
const MADE_TEXT: &str =
    "a value made into text (by print, debug, to_string, to_debug, `${}` or + on a string)";
const COMPARED: &str = "a value compared (by ==, !=, in, contains, index_of or dedup)";
const AS_JSON: &str = "a value made into JSON text (by to_json)";

thread_local! {
    /// How many of these functions are running on this thread, one inside the other.
    static RUNNING: Cell<usize> = const { Cell::new(0) };
}

/// Registers the functions, each under every name Rhai registers its own under. Like Rhai's
/// (`#[rhai_fn(pure)]`), they are pure, `register_fn`'s default: callable on a constant.
pub(crate) fn register(engine: &mut Engine) {
    for name in ["print", "debug"] {
        engine.register_fn(name, print_array);
        engine.register_fn(name, print_map);
    }
    for name in ["to_string", "to_debug"] {
        engine.register_fn(name, text_of_array);
        engine.register_fn(name, text_of_map);
    }
    engine.register_fn("==", arrays_equal);
    engine.register_fn("!=", arrays_differ);
    engine.register_fn("==", maps_equal);
    engine.register_fn("!=", maps_differ);
    engine.register_fn("to_json", map_to_json);
    engine.register_fn("parse_json", parse_json);
}

/// `map.to_json()`: for a map within the rule, exactly Rhai's own (with the `metadata` feature:
/// serde_json's text of the map, its keys in order, which recurses natively, a level per level
/// of the map); past it, an error naming the rule.
fn map_to_json(map: &mut Map) -> Fallible<String> {
    if !entries_within(map) {
        return Err(api_error(too_deep(AS_JSON)));
    }
    let ordered: std::collections::BTreeMap<&str, &Dynamic> =
        map.iter().map(|(k, v)| (k.as_str(), v)).collect();
    Ok(serde_json::to_string(&ordered).unwrap_or_else(|_| "ERROR".into()))
}

/// `parse_json(text)`: the JSON text's value, read as Pure reads a request body (the depth
/// rule counted before parsing): Rhai's refused text 128 levels deep, which the rule allows.
fn parse_json(text: &str) -> Fallible<Dynamic> {
    let value = crate::state::depth::parse_json(text).map_err(api_error)?;
    Ok(crate::script::value::to_dynamic(&value))
}

/// One of these functions running: how many are, counting it, until it is dropped.
struct Running {
    level: usize,
}

impl Drop for Running {
    fn drop(&mut self) {
        RUNNING.with(|r| r.set(self.level - 1));
    }
}

/// Starts one of these functions, checking its values (`within`) if it is the outermost; for
/// values too deep, the error, also noted in the call's context.
fn enter(
    context: &NativeCallContext,
    what: &'static str,
    within: impl FnOnce() -> bool,
) -> Fallible<Running> {
    let level = RUNNING.with(|r| r.get()) + 1;
    RUNNING.with(|r| r.set(level));
    let running = Running { level };
    // Inner calls only count: their values are parts of checked ones, so the count stays at
    // most DEPTH_MAX (the innermost array or map of a value within the rule is at that level).
    let allowed = match level {
        1 => within(),
        _ => level <= DEPTH_MAX,
    };
    if allowed {
        return Ok(running);
    }
    crate::script::context::note_too_deep(what, context.call_position());
    Err(api_error(too_deep(what)))
}

/// `print(array)`, `debug(array)`: past the rule, an error, which Rhai passes on: none of its
/// functions calls these two.
fn print_array(context: NativeCallContext, array: &mut Array) -> Fallible<ImmutableString> {
    let _running = enter(&context, MADE_TEXT, || items_within(array))?;
    Ok(format_array(&context, array))
}

fn print_map(context: NativeCallContext, map: &mut Map) -> Fallible<ImmutableString> {
    let _running = enter(&context, MADE_TEXT, || entries_within(map))?;
    Ok(format_map(&context, map))
}

/// `to_string(array)`, `to_debug(array)`: past the rule, an empty text (see the module doc).
fn text_of_array(context: NativeCallContext, array: &mut Array) -> ImmutableString {
    match enter(&context, MADE_TEXT, || items_within(array)) {
        Ok(_running) => format_array(&context, array),
        Err(_) => ImmutableString::new(),
    }
}

fn text_of_map(context: NativeCallContext, map: &mut Map) -> ImmutableString {
    match enter(&context, MADE_TEXT, || entries_within(map)) {
        Ok(_running) => format_map(&context, map),
        Err(_) => ImmutableString::new(),
    }
}

/// Rhai's `format_array`.
fn format_array(context: &NativeCallContext, array: &mut Array) -> ImmutableString {
    let len = array.len();
    let mut result = String::from("[");
    for (i, item) in array.iter_mut().enumerate() {
        result.push_str(&debug_text(context, item));
        if i < len - 1 {
            result.push_str(", ");
        }
    }
    result.push(']');
    result.into()
}

/// Rhai's `format_map`.
fn format_map(context: &NativeCallContext, map: &mut Map) -> ImmutableString {
    let len = map.len();
    let mut result = String::from("#{");
    for (i, (key, value)) in map.iter_mut().enumerate() {
        let separator = if i < len - 1 { ", " } else { "" };
        let text = debug_text(context, value);
        let _ = write!(result, "{key:?}: {text}{separator}");
    }
    result.push('}');
    result.into()
}

/// Rhai's `print_with_func(FUNC_TO_DEBUG, ...)`: `to_debug` through the engine (registered Rust
/// functions only: a script's own `to_debug` is not called), and when that fails (a limit
/// reached inside it), Rust's `Debug` of the value.
fn debug_text(context: &NativeCallContext, value: &mut Dynamic) -> ImmutableString {
    let engine = context.engine();
    match context.call_native_fn_raw(FUNC_TO_DEBUG, true, &mut [&mut *value]) {
        Ok(text) if text.is_string() => text.into_immutable_string().expect("a string"),
        Ok(other) => engine.map_type_name(other.type_name()).into(),
        Err(_) => engine.map_type_name(&format!("{value:?}")).into(),
    }
}

/// Rhai's `==` on two arrays. The check comes after the length test, as Rhai's own answers
/// without looking inside do: so `x in list` walks only the elements as long as `x`, and the
/// walk costs at most what Rhai's comparisons of them could.
fn arrays_equal(context: NativeCallContext, array1: &mut Array, array2: Array) -> Fallible<bool> {
    if array1.len() != array2.len() {
        return Ok(false);
    }
    if array1.is_empty() {
        return Ok(true);
    }
    let _running = enter(&context, COMPARED, || {
        items_within(array1) && items_within(&array2)
    })?;
    let mut array2 = array2;
    for (a1, a2) in array1.iter_mut().zip(array2.iter_mut()) {
        let equal = context
            .call_native_fn_raw(OP_EQUALS, true, &mut [&mut *a1, &mut *a2])
            .or_else(|error| match *error {
                EvalAltResult::ErrorFunctionNotFound(ref signature, ..)
                    if signature.starts_with(OP_EQUALS) =>
                {
                    // Rhai's rule: two elements of one type must have an `==`; of two types,
                    // they differ.
                    if a1.type_id() == a2.type_id() {
                        Err(error)
                    } else {
                        Ok(Dynamic::FALSE)
                    }
                }
                _ => Err(error),
            })?
            .as_bool()
            .unwrap_or(false);
        if !equal {
            return Ok(false);
        }
    }
    Ok(true)
}

fn arrays_differ(context: NativeCallContext, array1: &mut Array, array2: Array) -> Fallible<bool> {
    arrays_equal(context, array1, array2).map(|equal| !equal)
}

/// Rhai's `==` on two maps (which, unlike the arrays', passes on any error of `==` on two
/// values). The check comes after the size test, as for arrays.
fn maps_equal(context: NativeCallContext, map1: &mut Map, map2: Map) -> Fallible<bool> {
    if map1.len() != map2.len() {
        return Ok(false);
    }
    if !map1.is_empty() {
        let _running = enter(&context, COMPARED, || {
            entries_within(map1) && entries_within(&map2)
        })?;
        let mut map2 = map2;
        for (name, v1) in map1.iter_mut() {
            let Some(v2) = map2.get_mut(name) else {
                return Ok(false);
            };
            let equal = context
                .call_native_fn_raw(OP_EQUALS, true, &mut [v1, v2])?
                .as_bool()
                .unwrap_or(false);
            if !equal {
                return Ok(false);
            }
        }
    }
    Ok(true)
}

fn maps_differ(context: NativeCallContext, map1: &mut Map, map2: Map) -> Fallible<bool> {
    maps_equal(context, map1, map2).map(|equal| !equal)
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    use rhai::{FnPtr, Scope};

    use super::*;
    use crate::script::api::Row;
    use crate::script::api_error::ApiError;
    use crate::state::fields::Fields;
    use crate::state::key::Key;
    use crate::state::schema::{Schema, TableSchema};

    /// An embedder's type with its own `to_debug` and `==`, which Rhai calls through the engine.
    #[derive(Clone)]
    struct Point(i64);

    /// One whose `to_debug` and `==` fail (1) or give another type than expected (2): Rhai
    /// then writes the value's `Debug`, or the type's name, or takes it for "not equal".
    #[derive(Clone)]
    struct Odd(u8);

    fn odd(kind: u8, fine: Dynamic) -> Fallible<Dynamic> {
        match kind {
            0 => Ok(fine),
            1 => Err("odd".into()),
            _ => Ok(Dynamic::from_int(7)),
        }
    }

    fn schema() -> Schema {
        let table = TableSchema {
            name: "t".into(),
            fields: vec!["v".into(), "w".into()],
            types: Vec::new(),
        };
        Schema {
            tables: vec![table],
        }
    }

    /// Rhai's engine with rows and `Point`, and with these functions in place of Rhai's own
    /// (`ours`) or not; `print` and `debug` write to `printed`.
    fn engine(ours: bool, printed: &Arc<Mutex<Vec<String>>>) -> Engine {
        let mut engine = Engine::new();
        crate::script::api::register(&mut engine, &Arc::new(schema()), &[]);
        engine.register_type_with_name::<Point>("Point");
        engine.register_fn("to_debug", |p: &mut Point| format!("Point({})", p.0));
        engine.register_fn("==", |p: &mut Point, q: Point| p.0 == q.0);
        engine.register_type_with_name::<Odd>("Odd");
        engine.register_fn("to_debug", |o: &mut Odd| odd(o.0, "odd".into()));
        engine.register_fn("==", |o: &mut Odd, _: Odd| odd(o.0, Dynamic::TRUE));
        let lines = printed.clone();
        engine.on_print(move |text| lines.lock().unwrap().push(format!("print: {text}")));
        let lines = printed.clone();
        engine.on_debug(move |text, _, _| lines.lock().unwrap().push(format!("debug: {text}")));
        if ours {
            register(&mut engine);
        }
        engine
    }

    /// What each function is called through, on `a` alone. The script's own `to_string` and
    /// `to_debug` (in `OWN`) are called by name, never by Rhai's functions nor by these.
    const ON_ONE: &[&str] = &[
        "print(a)",
        "debug(a)",
        "to_string(a)",
        "to_debug(a)",
        "a.to_string()",
        "a.to_debug()",
        "`<${a}>`",
        "`${a}${a}`",
        r#""s" + a"#,
        r#"a + "s""#,
        r#"{ let s = "s"; s += a; s }"#,
        r#"{ let s = "s"; s.append(a); s }"#,
    ];
    /// On `a` and `b`.
    const ON_TWO: &[&str] = &[
        "a == b",
        "a != b",
        "b == a",
        "b in [1, a]",
        "[a, 2].contains(b)",
        "[1, a, b].index_of(b)",
        "[1, a, b].index_of(a, 2)",
        "{ let l = [a, b, b, a, 1]; l.dedup(); l }",
    ];
    /// On `a` and `b`, one level down: for values below the rule.
    const ON_TWO_INSIDE: &[&str] = &["[a] == [b]", "#{x: a, y: 1} != #{x: b, y: 1}"];
    const OWN: &str = r#"fn to_string(x) { "own" } fn to_debug(x) { "own" }"#;

    /// Runs every call on `a` and `b` in both engines: the same results, errors included (a
    /// row has no `==`), and the same lines printed.
    fn check_same(a: &Dynamic, b: &Dynamic, levels: usize, context: &str) {
        let inside = if levels < DEPTH_MAX {
            ON_TWO_INSIDE
        } else {
            &[]
        };
        let calls = ON_ONE.iter().chain(ON_TWO).chain(inside);
        let scripts = calls.flat_map(|call| [call.to_string(), format!("{OWN} {call}")]);
        for script in scripts {
            let [rhai, ours] = [false, true].map(|ours| {
                let printed = Arc::new(Mutex::new(Vec::new()));
                let engine = engine(ours, &printed);
                let mut scope = Scope::new();
                scope.push("a", a.clone());
                scope.push("b", b.clone());
                let result = engine.eval_with_scope::<Dynamic>(&mut scope, &script);
                let printed = printed.lock().unwrap().clone();
                (format!("{result:?}"), printed)
            });
            assert_eq!(rhai, ours, "{script}, {context}");
            assert_eq!(RUNNING.with(Cell::get), 0);
        }
        assert!(
            crate::script::context::take_too_deep().is_none(),
            "{context}: within the rule"
        );
    }

    fn scalar(rng: &mut StdRng) -> Dynamic {
        const TEXTS: &[&str] = &[
            "",
            "plain",
            "a \"quote\" and a \\ backslash",
            "line\nbreak\ttab\r",
            "\u{0}\u{1b}\u{7f}\u{2028}",
            "é ü 日本 🎉",
            "'single'",
            "#{not: a map}",
            "[1, 2]",
        ];
        const FLOATS: &[f64] = &[
            0.0,
            -0.0,
            1.0,
            0.1,
            -2.5,
            1e15,
            1e16,
            123456789.125,
            1e300,
            1e-300,
            f64::MIN_POSITIVE,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
        ];
        const CHARS: &[char] = &['a', '\'', '"', '\\', '\n', '\u{0}', 'é', '🎉'];
        let pick = |rng: &mut StdRng, n: usize| rng.random_range(0..n);
        match rng.random_range(0..14) {
            // Small integers and floats, so that some compare equal across the two types.
            0 | 1 => Dynamic::from_int(rng.random_range(-2..=2)),
            2 => Dynamic::from_float(rng.random_range(-2..=2) as f64),
            3 => Dynamic::from_int([i64::MIN, i64::MAX, -1, 1 << 53][pick(rng, 4)]),
            4 => Dynamic::from_float(FLOATS[pick(rng, FLOATS.len())]),
            5 | 6 => Dynamic::from(TEXTS[pick(rng, TEXTS.len())]),
            7 => Dynamic::UNIT,
            8 => Dynamic::from_bool(rng.random()),
            9 => Dynamic::from_char(CHARS[pick(rng, CHARS.len())]),
            10 => {
                let fields = Fields::from_values(&[Dynamic::from_int(1), Dynamic::from("x")]);
                Dynamic::from(Row::new(0, Key::int(rng.random_range(1..=2)), fields))
            }
            11 => match pick(rng, 2) {
                0 => Dynamic::from(Point(rng.random_range(1..=2))),
                _ => Dynamic::from(Odd(rng.random_range(0..=2))),
            },
            12 => Dynamic::from_blob(vec![0, 1, 0xab, 0xff]),
            _ => match pick(rng, 2) {
                0 => Dynamic::from(FnPtr::new("f").expect("a function name")),
                _ => Dynamic::from(1..5_i64),
            },
        }
    }

    /// A value exactly `levels` deep: an array or a map one of whose elements is `levels - 1`
    /// deep and the others at most 2 (some of them empty).
    fn value(rng: &mut StdRng, levels: usize) -> Dynamic {
        if levels == 0 {
            return scalar(rng);
        }
        let count = rng.random_range(1..=4);
        let spine = rng.random_range(0..count);
        let items = (0..count).map(|i| match i == spine {
            true => value(rng, levels - 1),
            false => shallow(rng, (levels - 1).min(2)),
        });
        let items: Vec<Dynamic> = items.collect();
        if rng.random() {
            return Dynamic::from_array(items);
        }
        const KEYS: &[&str] = &["a", "", "b c", "quote\"", "new\nline", "ü"];
        let map: Map = items
            .into_iter()
            .enumerate()
            .map(|(i, item)| {
                (
                    format!("{}{i}", KEYS[rng.random_range(0..KEYS.len())]).into(),
                    item,
                )
            })
            .collect();
        Dynamic::from_map(map)
    }

    /// A value at most `levels` deep.
    fn shallow(rng: &mut StdRng, levels: usize) -> Dynamic {
        match rng.random_range(0..=levels + 1) {
            0 if levels > 0 => Dynamic::from_array(Vec::new()),
            1 if levels > 0 => Dynamic::from_map(Map::new()),
            n => value(rng, n.min(levels)),
        }
    }

    /// `value` with one element changed: to another of the same type, to an equal number of the
    /// other type, or to a value of another type.
    fn changed(rng: &mut StdRng, value: &Dynamic) -> Dynamic {
        if let Ok(mut items) = value.as_array_ref().map(|items| items.clone()) {
            if !items.is_empty() {
                let at = rng.random_range(0..items.len());
                items[at] = changed(rng, &items[at]);
            }
            return Dynamic::from_array(items);
        }
        if let Ok(mut map) = value.as_map_ref().map(|map| map.clone()) {
            if let Some(key) = map
                .keys()
                .nth(rng.random_range(0..map.len().max(1)))
                .cloned()
            {
                let item = changed(rng, &map[&key]);
                map.insert(key, item);
            }
            return Dynamic::from_map(map);
        }
        match (value.as_int(), value.as_float()) {
            (Ok(i), _) if rng.random() => Dynamic::from_float(i as f64),
            (_, Ok(f)) if rng.random() && f.fract() == 0.0 && f.abs() < 1e15 => {
                Dynamic::from_int(f as i64)
            }
            _ => scalar(rng),
        }
    }

    fn seed() -> u64 {
        let seed = std::env::var("PURE_TEST_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| rand::rng().random());
        eprintln!("seed {seed} (replay with PURE_TEST_SEED={seed})");
        seed
    }

    /// Within the rule, these functions give what Rhai's give: the same text, the same answer
    /// of `==`, the same error, for values of every type Pure has, up to 128 levels deep.
    #[test]
    fn within_the_rule_every_call_gives_what_rhai_gives() {
        let mut rng = StdRng::seed_from_u64(seed());
        for case in 0..60 {
            let levels = [0, 1, 2, 3, 4, DEPTH_MAX - 1, DEPTH_MAX][case % 7];
            let a = value(&mut rng, levels);
            let b = match rng.random_range(0..3) {
                0 => a.clone(),
                1 => changed(&mut rng, &a),
                _ => value(&mut rng, levels),
            };
            let shown =
                |value: &Dynamic| format!("{value:?}").chars().take(200).collect::<String>();
            let context = format!(
                "case {case}, {levels} levels: {} and {}",
                shown(&a),
                shown(&b)
            );
            check_same(&a, &b, levels, &context);
        }
    }

    /// The text of an error of the table API's kind.
    fn message(error: &EvalAltResult) -> String {
        match error {
            EvalAltResult::ErrorRuntime(value, _) => match value.read_lock::<ApiError>() {
                Some(error) => error.0.clone(),
                None => format!("{value:?}"),
            },
            other => other.to_string(),
        }
    }

    /// `levels` arrays or maps, one inside the other, around 1.
    fn nested(levels: usize, map: bool) -> Dynamic {
        (0..levels).fold(Dynamic::from_int(1), |value, _| match map {
            true => Dynamic::from_map(Map::from_iter([("a".into(), value)])),
            false => Dynamic::from_array(vec![value]),
        })
    }

    /// One level past the rule, where Rhai's own would recurse on, every call fails naming the
    /// rule, or, where Rhai would ignore the error, gives an empty text or "not equal" (the
    /// engine then stops the call: `engine::build`). Either way the call's context holds the
    /// error that the call ends with.
    #[test]
    fn past_the_rule_every_call_fails_naming_it() {
        let printed = Arc::new(Mutex::new(Vec::new()));
        let engine = engine(true, &printed);
        for map in [false, true] {
            let calls = ON_ONE.iter().chain(ON_TWO).chain(ON_TWO_INSIDE);
            for (levels, call) in calls.flat_map(|c| [(DEPTH_MAX, c), (DEPTH_MAX + 1, c)]) {
                let mut scope = Scope::new();
                scope.push("a", nested(levels, map));
                scope.push("b", nested(levels, map));
                let result = engine.eval_with_scope::<Dynamic>(&mut scope, call);
                let too_deep = crate::script::context::take_too_deep();
                let inside = ON_TWO_INSIDE.contains(call) && levels == DEPTH_MAX;
                if levels == DEPTH_MAX && !inside {
                    assert!(result.is_ok() && too_deep.is_none(), "{call}: {result:?}");
                    continue;
                }
                let too_deep = too_deep.unwrap_or_else(|| panic!("{call}, {levels}: {result:?}"));
                let message = message(&too_deep);
                assert!(
                    message.contains("nests arrays and objects more than 128 levels deep"),
                    "{call}: {message}"
                );
                if let Err(error) = result {
                    assert_eq!(self::message(&error), message, "{call}");
                }
                assert_eq!(RUNNING.with(Cell::get), 0);
            }
        }
        // `print(a)` and `debug(a)` of the deepest array and map, and nothing past the rule.
        assert_eq!(printed.lock().unwrap().len(), 4);
    }

    /// Inside one of these calls, the others only count (their values are parts of the
    /// outermost's, which it checked): and past `DEPTH_MAX` of them, they fail whatever they
    /// are given, so that they never nest deeper.
    #[test]
    fn the_calls_never_nest_deeper_than_the_rule() {
        let printed = Arc::new(Mutex::new(Vec::new()));
        let engine = engine(true, &printed);
        let mut scope = Scope::new();
        scope.push("a", nested(DEPTH_MAX - 1, false));
        scope.push("b", nested(1000, false));
        // As if inside an outermost call: one level is taken.
        RUNNING.with(|r| r.set(1));
        let within = engine.eval_with_scope::<Dynamic>(&mut scope, "a == a");
        let past = engine.eval_with_scope::<Dynamic>(&mut scope, "b == b");
        assert_eq!(RUNNING.with(|r| r.replace(0)), 1);
        assert_eq!(within.expect("127 levels inside one").as_bool(), Ok(true));
        assert!(past.is_err(), "{past:?}");
        assert!(crate::script::context::take_too_deep().is_some());
    }
}
