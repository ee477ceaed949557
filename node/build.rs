//! Node-API link settings (napi-build): on Linux and macOS the addon's `napi_*` symbols are
//! resolved by the node process that loads it.

fn main() {
    napi_build::setup();
}
