//! The envelope each backend takes a profile in: Parca's `WriteRawRequest`
//! as its gRPC gateway's JSON (proto3 JSON: bytes in base64), Pyroscope's
//! `PushRequest` (`api/push/v1/push.proto`) as protobuf. Both carry one
//! series: its labels and the raw gzip'd pprof.

use prost::Message;
use serde::Serialize;

#[derive(Serialize)]
struct ParcaLabel<'a> {
    name: &'a str,
    value: &'a str,
}

#[derive(Serialize)]
struct ParcaLabelSet<'a> {
    labels: Vec<ParcaLabel<'a>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ParcaSample {
    raw_profile: String,
}

#[derive(Serialize)]
struct ParcaSeries<'a> {
    labels: ParcaLabelSet<'a>,
    samples: Vec<ParcaSample>,
}

#[derive(Serialize)]
struct ParcaWriteRaw<'a> {
    series: Vec<ParcaSeries<'a>>,
}

/// `WriteRawRequest` as the gateway's JSON (proto3 JSON: bytes in base64).
pub(super) fn parca_body(labels: &[(String, String)], gz: &[u8]) -> Vec<u8> {
    let req = ParcaWriteRaw {
        series: vec![ParcaSeries {
            labels: ParcaLabelSet {
                labels: labels
                    .iter()
                    .map(|(name, value)| ParcaLabel { name, value })
                    .collect(),
            },
            samples: vec![ParcaSample {
                raw_profile: super::base64::encode(gz),
            }],
        }],
    };
    serde_json::to_vec(&req).expect("plain structs serialize")
}

/// Pyroscope's push API (`api/push/v1/push.proto`, `api/types/v1`).
pub mod pyroscope_proto {
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct PushRequest {
        #[prost(message, repeated, tag = "1")]
        pub series: Vec<RawProfileSeries>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct RawProfileSeries {
        #[prost(message, repeated, tag = "1")]
        pub labels: Vec<LabelPair>,
        #[prost(message, repeated, tag = "2")]
        pub samples: Vec<RawSample>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct LabelPair {
        #[prost(string, tag = "1")]
        pub name: String,
        #[prost(string, tag = "2")]
        pub value: String,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct RawSample {
        #[prost(bytes = "vec", tag = "1")]
        pub raw_profile: Vec<u8>,
        /// A unique id, for the server to drop a repeated push.
        #[prost(string, tag = "2")]
        pub id: String,
    }
}

pub(super) fn pyroscope_body(labels: &[(String, String)], gz: &[u8]) -> Vec<u8> {
    use pyroscope_proto::*;
    PushRequest {
        series: vec![RawProfileSeries {
            labels: labels
                .iter()
                .map(|(name, value)| LabelPair {
                    name: name.clone(),
                    value: value.clone(),
                })
                .collect(),
            samples: vec![RawSample {
                raw_profile: gz.to_vec(),
                id: String::new(),
            }],
        }],
    }
    .encode_to_vec()
}
