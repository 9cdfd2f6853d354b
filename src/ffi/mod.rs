//! The C ABI. Every exported function has one shape: panic boundary → check and unpack
//! arguments → call the engine. No protocol logic lives here.

#![allow(non_camel_case_types)]
#![allow(clippy::missing_safety_doc)]

mod args;
mod boundary;
pub mod constants;
pub mod errors;
pub mod observe;
pub mod request;
pub mod server;
pub mod stream;
pub mod tls;
pub mod types;
pub mod ws;
