//! Generators shared by the property tests.

use proptest::prelude::*;
use serde_json::Value;

/// Random JSON, biased towards objects with the input contract's field names.
pub fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        ".{0,20}".prop_map(Value::String),
        Just(Value::String("http://a.example/x".into())),
        Just(Value::String("2026-11-02T10:15:00Z".into())),
        Just(Value::from(200)),
    ];
    leaf.prop_recursive(3, 32, 6, |inner| {
        let key = prop_oneof![
            Just("url".to_string()),
            Just("fetched_at".to_string()),
            Just("status".to_string()),
            Just("body".to_string()),
            Just("body_base64".to_string()),
            Just("content_type".to_string()),
            Just("crawl_id".to_string()),
            Just("ip".to_string()),
            "[a-z]{1,6}",
        ];
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::btree_map(key, inner, 0..8)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}
