//! `stats()` as a plain object with the keys and types of the server's `URL.INFO`, from the
//! server's own field list ([`urlseen_server::cmd::url_info::info`]), so that the embedded
//! namespace and the RESP client (which asks for RESP3) give the same object.

use serde_json::{Map, Number, Value};
use urlseen_engine::Namespace;
use urlseen_server::Frame;

/// The namespace's `URL.INFO` fields.
pub(crate) fn embedded(ns: &Namespace) -> Value {
    frame_to_json(urlseen_server::cmd::url_info::info(ns))
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn frame_to_json(frame: Frame) -> Value {
    match frame {
        Frame::Simple(b) | Frame::Bulk(b) | Frame::Error(b) => Value::String(text(&b)),
        Frame::Verbatim { data, .. } => Value::String(text(&data)),
        Frame::Integer(n) => Value::Number(n.into()),
        // JSON has no NaN or infinities; the client's RESP3 parser gives them as numbers, but
        // URL.INFO's doubles are probabilities and never one of them.
        Frame::Double(x) => Number::from_f64(x).map_or(Value::Null, Value::Number),
        Frame::Boolean(b) => Value::Bool(b),
        Frame::BigNumber(b) => Value::String(text(&b)),
        Frame::Null | Frame::NullArray => Value::Null,
        Frame::Array(items) | Frame::Set(items) | Frame::Push(items) => {
            Value::Array(items.into_iter().map(frame_to_json).collect())
        }
        Frame::Map(pairs) => {
            let mut map = Map::with_capacity(pairs.len());
            for (k, v) in pairs {
                let key = match frame_to_json(k) {
                    Value::String(s) => s,
                    other => other.to_string(),
                };
                map.insert(key, frame_to_json(v));
            }
            Value::Object(map)
        }
    }
}
