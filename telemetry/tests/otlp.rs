//! Keel's spans and metrics exported to a real OTLP/HTTP receiver on loopback, which
//! decodes the protobuf requests: parentage, attributes, content, a host's
//! traceparent, and endpoints that are down or slow.

#![allow(clippy::unwrap_used)]

mod otlp {
    pub mod common;
    mod content;
    mod failure;
    mod metrics;
    mod spans;
    mod traceparent;
}
