//! `stats()` as a Python dict, with the keys and types of the server's `URL.INFO`: the embedded
//! engine's from the server's own field list ([`urlseen_server::cmd::url_info::info`]), the
//! client's from the server's RESP3 reply, so that both give the same dict.

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use urlseen_engine::Namespace;
use urlseen_server::Frame;

/// The namespace's `URL.INFO` fields.
pub(crate) fn embedded<'py>(py: Python<'py>, ns: &Namespace) -> PyResult<Bound<'py, PyDict>> {
    let frame = py.detach(|| urlseen_server::cmd::url_info::info(ns));
    match frame_to_py(py, frame)?.cast_into::<PyDict>() {
        Ok(dict) => Ok(dict),
        Err(_) => Err(crate::errors::Error::new_err("URL.INFO did not give a map")),
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn frame_to_py(py: Python<'_>, frame: Frame) -> PyResult<Bound<'_, PyAny>> {
    Ok(match frame {
        Frame::Simple(b) | Frame::Bulk(b) | Frame::Error(b) => {
            text(&b).into_pyobject(py)?.into_any()
        }
        Frame::Verbatim { data, .. } => text(&data).into_pyobject(py)?.into_any(),
        Frame::Integer(n) => n.into_pyobject(py)?.into_any(),
        Frame::Double(x) => x.into_pyobject(py)?.into_any(),
        Frame::Boolean(b) => b.into_pyobject(py)?.to_owned().into_any(),
        Frame::BigNumber(b) => py.get_type::<pyo3::types::PyInt>().call1((text(&b),))?,
        Frame::Null | Frame::NullArray => py.None().into_bound(py),
        Frame::Array(items) | Frame::Set(items) | Frame::Push(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(frame_to_py(py, item)?)?;
            }
            list.into_any()
        }
        Frame::Map(pairs) => {
            let dict = PyDict::new(py);
            for (k, v) in pairs {
                dict.set_item(frame_to_py(py, k)?, frame_to_py(py, v)?)?;
            }
            dict.into_any()
        }
    })
}

/// A RESP3 reply (redis-rs) as Python: maps become dicts, doubles floats, booleans bools.
pub(crate) fn value_to_py(py: Python<'_>, value: redis::Value) -> PyResult<Bound<'_, PyAny>> {
    use redis::Value as V;
    Ok(match value {
        V::Nil => py.None().into_bound(py),
        V::Int(n) => n.into_pyobject(py)?.into_any(),
        V::BulkString(b) => text(&b).into_pyobject(py)?.into_any(),
        V::SimpleString(s) => s.into_pyobject(py)?.into_any(),
        V::Okay => "OK".into_pyobject(py)?.into_any(),
        V::Double(x) => x.into_pyobject(py)?.into_any(),
        V::Boolean(b) => b.into_pyobject(py)?.to_owned().into_any(),
        V::VerbatimString { text: t, .. } => t.into_pyobject(py)?.into_any(),
        V::Array(items) | V::Set(items) => {
            let list = PyList::empty(py);
            for item in items {
                list.append(value_to_py(py, item)?)?;
            }
            list.into_any()
        }
        V::Map(pairs) => {
            let dict = PyDict::new(py);
            for (k, v) in pairs {
                dict.set_item(value_to_py(py, k)?, value_to_py(py, v)?)?;
            }
            dict.into_any()
        }
        V::Attribute { data, .. } => value_to_py(py, *data)?,
        other => format!("{other:?}").into_pyobject(py)?.into_any(),
    })
}
