//! Pieces every page uses: the shell, status badges, key links, times, error
//! panels and the loading wrapper.

pub mod actions;
mod layout;
mod refresh;
mod widgets;

pub use layout::Layout;
pub use refresh::LiveRefresh;
pub use widgets::{
    Age, ChartFigure, KeyLink, Loaded, StatusBadge, Time, provide_clock, replica_note,
};
