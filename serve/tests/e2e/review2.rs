//! Review 2: faults found in the depth rule's walks, each shown failing. (Those found in the
//! answer budget and in shedding are fixed; their tests are in `readers`.)

use std::time::Instant;

use crate::harness::{test_app_dir, Client, Launch};

/// Values deep on the native stack that the depth rule does not see: it counts arrays and maps
/// only, and Rhai's size check after each assignment does not look inside a function pointer's
/// curried arguments nor inside a custom type. So a handler (in an app whose limits are raised
/// within the server's caps, as the `deep` test app's are) builds a function pointer curried
/// with a function pointer, or a `respond` whose body is a `respond`, a million levels deep, a
/// level per loop turn without copying (`take`): in about 0.4 s, not in the quadratic time
/// that building nested arrays takes (reliability.md's "thirty times faster" estimate). Only
/// dropping it at the end of the handler then walks it natively, and overflows the 64 MiB
/// handler stack (here from about 400,000 levels for the first, 500,000 for the second): the
/// whole server aborts. Each should be a 200 or a 500 for its own request.
#[test]
fn a_value_a_million_levels_deep_outside_arrays_and_maps_does_not_abort_the_server() {
    let data = tempfile::tempdir().expect("tempdir");
    for path in ["/curried/keep/1000000", "/responded/1000000"] {
        let server = Launch::new(&test_app_dir("deep"), data.path()).start();
        let mut client = server.client();
        let started = Instant::now();
        let answer = client.request("GET", path, None);
        let answer = answer.unwrap_or_else(|e| {
            panic!(
                "{path}: no answer after {:?} (the server aborted): {e}\nstderr:\n{}",
                started.elapsed(),
                server.stderr_text()
            )
        });
        assert!(
            answer.status == 200 || answer.status == 500,
            "{path}: {}",
            answer.text()
        );
        let next = Client::connect(server.address).get("/nested/1");
        assert_eq!(next.status, 200, "{path}: {}", next.text());
        server.stop();
    }
}

/// Rhai's `to_json` and `parse_json`, which scripts can call (Pure keeps Rhai's standard
/// packages), do not follow the depth rule: `to_json` writes objects 6,000 levels deep (a
/// native walk, serde's, that no check bounds, where `print` and `to_string` of the same value
/// fail naming the rule), and `parse_json`, serde_json with its default limit, refuses the
/// text of a value 128 levels deep, which the rule allows everywhere else (a body, a stored
/// value, an answer).
#[test]
fn rhai_s_to_json_and_parse_json_follow_the_depth_rule() {
    let data = tempfile::tempdir().expect("tempdir");
    let server = Launch::new(&test_app_dir("deep"), data.path()).start();
    let mut client = server.client();
    let round = client.get("/json/round/128");
    let past = client.get("/json/to_json/6000");
    server.stop();
    assert_eq!(
        (round.status, round.json()),
        (200, serde_json::json!({ "depth": 128 })),
        "parse_json(to_json(a value 128 levels deep)): {}",
        round.text()
    );
    assert_eq!(
        past.status,
        500,
        "to_json of objects 6,000 levels deep: {}",
        past.text()
    );
}
