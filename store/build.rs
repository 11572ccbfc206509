//! The migrations are compiled in (`sqlx::migrate!` in `src/store.rs`),
//! which cargo does not know about by itself: rebuild when they change.

fn main() {
    println!("cargo::rerun-if-changed=../migrations");
}
