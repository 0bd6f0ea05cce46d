//! Review of research 034: write records that carry keys as their own bytes (tag 03), and the
//! records written before it (tag 02, keys as tagged parts), which must still read as the same
//! changes; damage refused, never a panic, never a key unlike its parts.

#[cfg(test)]
mod reviewed_034_tests {
    use pure_lang::codec::put_varint;
    use pure_lang::{
        Change, Dynamic, Fields, ImmutableString, Key, KeyPart, Limits, Request, Schema,
        TableSchema, Tables,
    };
    use pure_runtime::record::{apply_record, decode, encode_writes, put_key, Decoded, Mapping};
    use pure_runtime::{App, Runtime, RuntimeOptions};
    use serde_json::{json, Value};

    const TABLES: u32 = 3;
    const FIELDS: usize = 5;
    const LONG: &str = "a key string longer than the twenty-three inline bytes";

    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }

        fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
            &items[self.below(items.len() as u64) as usize]
        }
    }

    fn random_key(rng: &mut Rng) -> Key {
        let n = 1 + rng.below(5) as usize;
        Key::from_parts(
            (0..n)
                .map(|_| match rng.below(6) {
                    0 => {
                        KeyPart::Int(*rng.pick(&[i64::MIN, -256, -255, -1, 0, 255, 256, i64::MAX]))
                    }
                    1 => KeyPart::Int(rng.next() as i64),
                    2 => KeyPart::Int(rng.below(5) as i64),
                    3 => KeyPart::Str((*rng.pick(&["", "\0", "a\0", "ключ", "\0\0b"])).into()),
                    4 => KeyPart::Str(format!("{LONG}{}", rng.below(3)).into()),
                    _ => KeyPart::Str(format!("k{}", rng.below(10)).into()),
                })
                .collect(),
        )
    }

    fn random_value(rng: &mut Rng) -> Dynamic {
        match rng.below(5) {
            0 => Dynamic::UNIT,
            1 => Dynamic::from_int(rng.next() as i64),
            2 => Dynamic::from(ImmutableString::from(*rng.pick(&["", "x\0y", LONG]))),
            3 => Dynamic::from_float(-0.5),
            _ => Dynamic::from_bool(true),
        }
    }

    fn random_changes(rng: &mut Rng, n: usize) -> Vec<Change> {
        (0..n)
            .map(|_| {
                let table = rng.below(u64::from(TABLES)) as u32;
                let key = random_key(rng);
                let values: Vec<Dynamic> = (0..rng.below(FIELDS as u64 + 1))
                    .map(|_| random_value(rng))
                    .collect();
                let fields = Fields::from_values(&values);
                match rng.below(3) {
                    0 => Change::Put { table, key, fields },
                    1 => {
                        let mask = 1 + rng.below((1 << FIELDS) - 1);
                        let full: Vec<Dynamic> = (0..FIELDS).map(|_| random_value(rng)).collect();
                        Change::Patch {
                            table,
                            key,
                            mask,
                            fields: Fields::from_values(&full),
                        }
                    }
                    _ => Change::Delete { table, key },
                }
            })
            .collect()
    }

    fn schema() -> Schema {
        Schema {
            tables: (0..TABLES)
                .map(|t| TableSchema {
                    name: format!("t{t}"),
                    fields: (0..FIELDS).map(|f| format!("f{f}")).collect(),
                    types: Vec::new(),
                })
                .collect(),
        }
    }

    fn change_key(change: &Change) -> &Key {
        match change {
            Change::Put { key, .. } | Change::Patch { key, .. } | Change::Delete { key, .. } => key,
        }
    }

    /// A writes record as written before research note 034: tag 02, keys as their parts.
    fn encode_old(changes: &[Change]) -> Vec<u8> {
        let mut out = vec![2u8];
        for change in changes {
            match change {
                Change::Put { table, key, fields } => {
                    put_varint(&mut out, u64::from(*table) << 2);
                    put_key(&mut out, key);
                    let used = fields.used();
                    put_varint(&mut out, used as u64);
                    (0..used).for_each(|slot| fields.put_slot(&mut out, slot));
                }
                Change::Patch {
                    table,
                    key,
                    mask,
                    fields,
                } => {
                    put_varint(&mut out, u64::from(*table) << 2 | 1);
                    put_key(&mut out, key);
                    put_varint(&mut out, *mask);
                    let mut bits = *mask;
                    while bits != 0 {
                        let slot = bits.trailing_zeros() as usize;
                        bits &= bits - 1;
                        fields.put_slot(&mut out, slot);
                    }
                }
                Change::Delete { table, key } => {
                    put_varint(&mut out, u64::from(*table) << 2 | 2);
                    put_key(&mut out, key);
                }
            }
        }
        out
    }

    fn decoded(bytes: &[u8], mapping: &Mapping) -> Vec<Change> {
        match decode(bytes, mapping) {
            Ok(Decoded::Writes(changes)) => changes,
            Ok(Decoded::Schema(_)) => panic!("a writes record decoded as a schema"),
            Err(e) => panic!("{bytes:02x?} does not decode: {e}"),
        }
    }

    /// Write records (tag 03) read back as the changes written, key for key and byte for byte
    /// (re-encoding the decoded changes gives the same record); records written before note
    /// 034 (tag 02) of the same changes read as the same changes.
    #[test]
    fn records_of_either_tag_read_back_the_changes_written() {
        let schema = schema();
        let mapping = Mapping::identity(&schema);
        let mut rng = Rng(0x0034_0101);
        for round in 0..3_000 {
            let n = 1 + rng.below(6) as usize;
            let changes = random_changes(&mut rng, n);
            let mut record = Vec::new();
            encode_writes(&mut record, &changes);
            assert_eq!(record[0], 3, "written with keys as their bytes");
            let old = encode_old(&changes);
            for bytes in [&record, &old] {
                let back = decoded(bytes, &mapping);
                assert_eq!(back.len(), changes.len(), "round {round}");
                for (a, b) in changes.iter().zip(&back) {
                    assert_eq!(change_key(a).as_bytes(), change_key(b).as_bytes());
                    assert_eq!(change_key(a).parts(), change_key(b).parts());
                }
                let mut again = Vec::new();
                encode_writes(&mut again, &back);
                assert_eq!(again, record, "round {round}: tag {}", bytes[0]);
            }
            // Applied, both leave the same tables.
            let mut from_new = Tables::new(TABLES as usize);
            let mut from_old = Tables::new(TABLES as usize);
            apply_record(&record, &mapping, &mut from_new).expect("applies");
            apply_record(&old, &mapping, &mut from_old).expect("applies");
            for t in 0..TABLES {
                let rows = |tables: &Tables| -> Vec<(Vec<u8>, String)> {
                    tables
                        .rows(t)
                        .map(|(k, f)| (k.as_bytes().to_vec(), format!("{:?}", f.to_vec())))
                        .collect()
                };
                assert_eq!(rows(&from_new), rows(&from_old), "round {round}");
            }
        }
    }

    /// A record with a key's bytes damaged (a byte changed, the length off, bytes cut or
    /// added): refused, or decoded with every key the one encoding of its parts; never a panic,
    /// in decoding or applying it.
    #[test]
    fn damaged_records_are_refused_or_hold_only_true_keys() {
        let schema = schema();
        let mapping = Mapping::identity(&schema);
        let mut rng = Rng(0x0034_0102);
        let (mut refused, mut accepted) = (0, 0);
        for _ in 0..30_000 {
            let n = 1 + rng.below(3) as usize;
            let changes = random_changes(&mut rng, n);
            let mut record = Vec::new();
            encode_writes(&mut record, &changes);
            // Damage within the first change's key most of the time: its length is at 2 (after
            // the tag and a one-byte head), its bytes after that.
            let key_len = change_key(&changes[0]).as_bytes().len();
            let key_at = 3 + usize::from(key_len >= 0x80);
            match rng.below(5) {
                0 => {
                    let at = key_at + rng.below(key_len as u64) as usize;
                    record[at] = rng.next() as u8;
                }
                1 => {
                    let at = key_at + rng.below(key_len as u64) as usize;
                    record[at] ^= 1 << rng.below(8);
                }
                2 => {
                    let at = 1 + rng.below(record.len() as u64 - 1) as usize;
                    record[at] = rng.next() as u8;
                }
                3 => {
                    let cut = 1 + rng.below(record.len() as u64 - 1) as usize;
                    record.truncate(cut);
                }
                _ => {
                    let at = key_at + rng.below(key_len as u64 + 1) as usize;
                    record.insert(at, *rng.pick(&[0x00u8, 0xFF, 0x18, 0x30, 0x19]));
                }
            }
            let result = std::panic::catch_unwind(|| decode(&record, &mapping));
            let Ok(result) = result else {
                panic!("decoding {record:02x?} panicked");
            };
            match result {
                Err(_) => refused += 1,
                Ok(Decoded::Schema(_)) => panic!("a writes record decoded as a schema"),
                Ok(Decoded::Writes(back)) => {
                    accepted += 1;
                    for change in &back {
                        let key = change_key(change);
                        assert_eq!(
                            Key::from_parts(key.parts()).as_bytes(),
                            key.as_bytes(),
                            "{record:02x?}: a key unlike its parts"
                        );
                    }
                    let applied = std::panic::catch_unwind(|| {
                        let mut tables = Tables::new(TABLES as usize);
                        let _ = apply_record(&record, &mapping, &mut tables);
                        tables.check_trees();
                    });
                    assert!(applied.is_ok(), "applying {record:02x?} panicked");
                }
            }
        }
        assert!(refused > 1_000 && accepted > 100, "{refused} {accepted}");
    }

    /// A key's length in a record that points past the record, or is zero: refused.
    #[test]
    fn a_key_length_past_the_record_or_zero_is_refused() {
        let mapping = Mapping::identity(&schema());
        for bytes in [
            &[3u8, 0x02, 0x00][..],             // delete, a key of no bytes
            &[3, 0x02, 0x05, 0x19, 0x01],       // 5 bytes said, 2 there
            &[3, 0x02, 0xFF, 0xFF, 0xFF, 0x0F], // a huge length
            &[3, 0x02],                         // no length
            &[3, 0x00, 0x02, 0x19, 0x01],       // a put without its count
            &[3, 0x02, 0x02, 0x19, 0x01, 0x02], // a second change cut after its head
        ] {
            let result = std::panic::catch_unwind(|| decode(bytes, &mapping));
            assert!(
                matches!(result, Ok(Err(_))),
                "{bytes:02x?}: {:?}",
                result.map(|r| r.is_ok())
            );
        }
    }

    const MANIFEST: &str = r#"{ "name": "keys", "routes": {}, "tables": { "rows": ["v"] } }"#;

    const SCRIPT: &str = r#"
fn parts(k) { if type_of(k) == "array" { k } else { [k] } }
fn put_row(k, m) {
    let p = parts(k);
    if p.len() == 1 { rows.put(p[0], m); }
    else if p.len() == 2 { rows.put(p[0], p[1], m); }
    else if p.len() == 3 { rows.put(p[0], p[1], p[2], m); }
    else { rows.put(p[0], p[1], p[2], p[3], m); }
}
fn get_row(k) {
    let p = parts(k);
    if p.len() == 1 { rows.get(p[0]) }
    else if p.len() == 2 { rows.get(p[0], p[1]) }
    else if p.len() == 3 { rows.get(p[0], p[1], p[2]) }
    else { rows.get(p[0], p[1], p[2], p[3]) }
}
fn put(req) { put_row(req.body.key, #{ v: req.body.v }); }
fn patch(req) { let r = get_row(req.body.key); if r != () { r.v = req.body.v; r.save(); } }
fn remove(req) { rows.delete_all([req.body.key]); }
fn all(req) { let out = []; for r in rows.scan((), (), 10000) { out.push([r.key, r.v]); } out }
"#;

    fn app() -> App {
        App::from_sources(
            MANIFEST,
            vec![("keys.rhai".into(), SCRIPT.into())],
            Limits::default(),
        )
        .expect("loads")
    }

    fn write(rt: &Runtime, handler: &str, body: Value) {
        let request = Request {
            body: pure_lang::to_dynamic(&body),
            ..Request::default()
        };
        rt.write(handler, request)
            .expect("queued")
            .blocking_recv()
            .expect("answered")
            .expect("the write succeeds");
    }

    fn all(rt: &Runtime) -> Value {
        rt.read("all", Request::default())
            .expect("reads")
            .body
            .to_value()
    }

    /// Through the runtime: rows of keys of every kind (composite, strings with `00`, long
    /// ones on the heap, integer extremes) put, patched and deleted, then the data directory
    /// reopened: the log's records give back exactly those rows.
    #[test]
    fn keys_of_every_kind_survive_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let keys = [
            json!(0),
            json!(-1),
            json!(i64::MIN),
            json!(i64::MAX),
            json!("\u{0}"),
            json!("a\u{0}b"),
            json!(LONG),
            json!([1, "x\u{0}", -300]),
            json!([i64::MAX, i64::MAX, i64::MAX, LONG]),
            json!(["ключ", 0]),
            json!([""]),
        ];
        let rt = Runtime::open(app(), dir.path(), RuntimeOptions::default()).unwrap();
        for (i, key) in keys.iter().enumerate() {
            write(&rt, "put", json!({"key": key, "v": i}));
        }
        for key in keys.iter().step_by(3) {
            write(&rt, "patch", json!({"key": key, "v": "patched"}));
        }
        write(&rt, "remove", json!({"key": keys[1]}));
        write(&rt, "remove", json!({"key": keys[7]}));
        let before = all(&rt);
        assert_eq!(before.as_array().map(Vec::len), Some(keys.len() - 2));
        rt.shutdown();
        drop(rt);
        let rt = Runtime::open(app(), dir.path(), RuntimeOptions::default()).unwrap();
        assert_eq!(all(&rt), before, "the same rows after a restart");
        rt.shutdown();
    }
}
