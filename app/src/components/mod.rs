//! Pieces every page uses: the shell, status badges, key links, times, error
//! panels and the loading wrapper.

pub mod actions;
mod islands;
mod layout;
mod refresh;
mod widgets;

pub use islands::{AutoSubmit, HydrationMark, SubmitOnce};
pub use layout::Layout;
pub use refresh::LiveRefresh;
pub use widgets::{
    Age, ChartFigure, KeyLink, Loaded, StatusBadge, TeamSelect, Time, provide_clock, replica_note,
};
