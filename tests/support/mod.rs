#![allow(dead_code)]
pub mod acp_client;
pub mod mock_model;
pub mod sse;
