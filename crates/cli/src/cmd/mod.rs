//! One module per subcommand: its clap arguments and its `run`.

pub mod analyze;
pub mod bench;
pub mod convert;
pub mod data;
pub mod dump;
pub mod eval;
pub mod generate;
pub mod import;
pub mod init;
pub mod kernels;
pub mod report;
pub mod train;
pub mod train_bench;
