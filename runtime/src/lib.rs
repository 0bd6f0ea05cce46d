//! runtime (to be written)
