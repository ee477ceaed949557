//! One module per subcommand.

pub mod bench;
pub mod canon;
pub mod filter;
pub mod gen_urls;
pub mod plan;
pub mod serve;
pub mod store;
