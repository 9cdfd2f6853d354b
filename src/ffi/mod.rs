//! The C ABI. Every exported function has one shape: panic boundary → check and unpack
//! arguments → call the engine. No protocol logic lives here.

#![allow(non_camel_case_types)]
#![allow(clippy::missing_safety_doc)]

mod args;
mod boundary;
pub mod cache;
pub mod constants;
pub mod errors;
pub mod observe;
pub mod policy;
pub mod prepared;
pub mod request;
pub mod server;
pub mod static_files;
pub mod stream;
pub mod tls;
pub mod types;
pub mod ws;
