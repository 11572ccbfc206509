//! One timestamp type for both backends; it lives with the contract's
//! writer (`idem_consumer::Ts`), which binds times exactly as Idem reads them.

pub use idem_consumer::Ts;
