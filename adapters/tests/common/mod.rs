//! A loopback mock HTTP server for wire-shape tests: records every request and answers
//! with whatever the test's handler returns.
#![allow(dead_code)]

pub mod conversation;

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::Value;

/// One request as the mock saw it.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    /// Lower-case header names.
    pub headers: HashMap<String, String>,
    pub body: Value,
}

/// What the handler answers: status, headers, body text.
pub type Answer = (u16, Vec<(String, String)>, String);

pub struct Mock {
    pub addr: SocketAddr,
    pub seen: Arc<Mutex<Vec<Recorded>>>,
}

impl Mock {
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
    pub fn requests(&self) -> Vec<Recorded> {
        self.seen.lock().unwrap().clone()
    }
}

pub async fn mock<F>(handler: F) -> Mock
where
    F: Fn(&Recorded) -> Answer + Send + Sync + 'static,
{
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let handler = Arc::new(handler);
    let seen2 = seen.clone();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let handler = handler.clone();
            let seen = seen2.clone();
            tokio::spawn(async move {
                let service =
                    hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                        let handler = handler.clone();
                        let seen = seen.clone();
                        async move {
                            let method = req.method().to_string();
                            let path = req.uri().path().to_string();
                            let headers = req
                                .headers()
                                .iter()
                                .map(|(k, v)| {
                                    (k.as_str().to_string(), v.to_str().unwrap_or("").to_string())
                                })
                                .collect();
                            let bytes = req.into_body().collect().await.unwrap().to_bytes();
                            let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
                            let rec = Recorded {
                                method,
                                path,
                                headers,
                                body,
                            };
                            let (status, hdrs, text) = handler(&rec);
                            seen.lock().unwrap().push(rec);
                            let mut resp = Response::new(Full::new(Bytes::from(text)));
                            *resp.status_mut() = hyper::StatusCode::from_u16(status).unwrap();
                            resp.headers_mut()
                                .insert("content-type", "application/json".parse().unwrap());
                            for (k, v) in hdrs {
                                resp.headers_mut().insert(
                                    hyper::header::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                                    v.parse().unwrap(),
                                );
                            }
                            Ok::<_, Infallible>(resp)
                        }
                    });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    Mock { addr, seen }
}
