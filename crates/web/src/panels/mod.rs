//! The page's panels, each a component with its own messages: the backend badge (header), the model
//! picker with the load status, "Open model…", the generator, "Train on this text", and the lab (tabs over
//! `crate::views`). They get what they show through props and report to the root through callbacks.

mod badge;
mod generator;
mod lab_tabs;
mod open;
mod picker;
mod tune;

pub use badge::BackendBadge;
pub use generator::{GenReport, Generator};
pub use lab_tabs::LabPanel;
pub use open::{files_of, OpenModel, OpenState};
pub use picker::ModelPicker;
pub use tune::TunePanel;
