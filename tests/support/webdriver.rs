//! A W3C WebDriver client (<https://www.w3.org/TR/webdriver2/>), just what
//! the browser tests use: a session, navigation, scripts, elements, key
//! actions, windows and screenshots, plus any command of the session by
//! its path (a driver's own, such as chromedriver's `goog/cdp/execute`).
//! It speaks plain HTTP on loopback through the reqwest client pincer
//! already has. (fantoccini, which the tests used before, brought an
//! older HTTP stack and Unicode segmentation tables of its own: about a
//! fifth of the test build's dependencies' time for a few hundred lines.)
#![allow(dead_code)]

use std::fmt;
use std::time::Duration;

use serde_json::{Value, json};

/// How WebDriver names an element in JSON (the spec's "web element
/// identifier").
const ELEMENT_KEY: &str = "element-6066-11e4-a52e-4f735466cecf";

/// A command that failed: the driver's error code and message, or why the
/// driver could not be reached or understood.
#[derive(Debug, Clone)]
pub struct Error {
    /// The spec's error code (`no such element`, `javascript error`, …),
    /// or `transport` when no WebDriver answer came back.
    pub code: String,
    pub message: String,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for Error {}

impl Error {
    fn transport(message: impl fmt::Display) -> Self {
        Self {
            code: "transport".to_string(),
            message: message.to_string(),
        }
    }
}

pub type Result<T> = std::result::Result<T, Error>;

/// A WebDriver session. Clones share it. Dropping it leaves the session
/// (and its browser) running: whoever started the driver ends it.
#[derive(Clone)]
pub struct Client {
    http: reqwest::Client,
    /// `http://127.0.0.1:{port}/session/{id}`.
    session_url: String,
    session: String,
    capabilities: Value,
}

fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("an HTTP client for WebDriver")
}

/// Sends one command and returns its `value`, or the error the driver
/// answered with.
async fn send(
    http: &reqwest::Client,
    method: reqwest::Method,
    url: &str,
    body: Option<&Value>,
) -> Result<Value> {
    let mut request = http.request(method, url);
    if let Some(body) = body {
        request = request.json(body);
    }
    let response = request.send().await.map_err(Error::transport)?;
    let status = response.status();
    let bytes = response.bytes().await.map_err(Error::transport)?;
    let mut answer: Value = serde_json::from_slice(&bytes).map_err(|e| {
        Error::transport(format!(
            "{url} answered {status} with what is not JSON ({e}): {}",
            String::from_utf8_lossy(&bytes)
        ))
    })?;
    let value = answer["value"].take();
    // The spec answers every error with a 4xx or 5xx status; a script's
    // result may itself be an object with an `error` field.
    if status.is_success() {
        return Ok(value);
    }
    Err(Error {
        code: value["error"]
            .as_str()
            .unwrap_or("unknown error")
            .to_string(),
        message: value["message"]
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| format!("{url} answered {status}: {value}")),
    })
}

impl Client {
    /// Starts a session on the driver at `driver` (`http://host:port`)
    /// with these capabilities (the spec's `alwaysMatch`).
    pub async fn new_session(driver: &str, capabilities: Value) -> Result<Self> {
        let http = http();
        let value = send(
            &http,
            reqwest::Method::POST,
            &format!("{driver}/session"),
            Some(&json!({ "capabilities": { "alwaysMatch": capabilities } })),
        )
        .await?;
        let session = value["sessionId"]
            .as_str()
            .ok_or_else(|| Error::transport(format!("a new session without an id: {value}")))?
            .to_string();
        Ok(Self {
            http,
            session_url: format!("{driver}/session/{session}"),
            session,
            capabilities: value["capabilities"].clone(),
        })
    }

    /// The running session `session` on the driver at `driver`, if it
    /// answers.
    pub async fn existing_session(driver: &str, session: &str) -> Result<Self> {
        let client = Self {
            http: http(),
            session_url: format!("{driver}/session/{session}"),
            session: session.to_string(),
            capabilities: Value::Null,
        };
        client.window().await?;
        Ok(client)
    }

    /// The session's id.
    pub fn session_id(&self) -> &str {
        &self.session
    }

    /// What the driver said the session has (empty for one found with
    /// [`Client::existing_session`]).
    pub fn capabilities(&self) -> &Value {
        &self.capabilities
    }

    /// Any command of the session: `path` under `session/{id}/`, a GET
    /// without a body and a POST with one.
    pub async fn command(&self, path: &str, body: Option<Value>) -> Result<Value> {
        let method = if body.is_some() {
            reqwest::Method::POST
        } else {
            reqwest::Method::GET
        };
        self.call(method, path, body).await
    }

    async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value> {
        let url = if path.is_empty() {
            self.session_url.clone()
        } else {
            format!("{}/{path}", self.session_url)
        };
        send(&self.http, method, &url, body.as_ref()).await
    }

    async fn post(&self, path: &str, body: Value) -> Result<Value> {
        self.call(reqwest::Method::POST, path, Some(body)).await
    }

    async fn get(&self, path: &str) -> Result<Value> {
        self.call(reqwest::Method::GET, path, None).await
    }

    /// Ends the session (the driver closes its browser).
    pub async fn close(&self) -> Result<()> {
        self.call(reqwest::Method::DELETE, "", None).await.map(drop)
    }

    pub async fn goto(&self, url: &str) -> Result<()> {
        self.post("url", json!({ "url": url })).await.map(drop)
    }

    pub async fn refresh(&self) -> Result<()> {
        self.post("refresh", json!({})).await.map(drop)
    }

    pub async fn current_url(&self) -> Result<url::Url> {
        let value = self.get("url").await?;
        let text = value.as_str().unwrap_or_default();
        url::Url::parse(text).map_err(|e| Error::transport(format!("the page's URL {text:?}: {e}")))
    }

    /// Runs `script` (a function body) with `args` and returns what it
    /// returned.
    pub async fn execute(&self, script: &str, args: Vec<Value>) -> Result<Value> {
        self.post("execute/sync", json!({ "script": script, "args": args }))
            .await
    }

    /// Runs `script` (a function body whose last argument is the callback
    /// that ends it) and returns what it passed to the callback.
    pub async fn execute_async(&self, script: &str, args: Vec<Value>) -> Result<Value> {
        self.post("execute/async", json!({ "script": script, "args": args }))
            .await
    }

    /// The first element `css` selects.
    pub async fn find(&self, css: &str) -> Result<Element> {
        let value = self
            .post("element", json!({ "using": "css selector", "value": css }))
            .await?;
        self.element(&value)
    }

    /// Every element `css` selects, in document order.
    pub async fn find_all(&self, css: &str) -> Result<Vec<Element>> {
        let value = self
            .post("elements", json!({ "using": "css selector", "value": css }))
            .await?;
        value
            .as_array()
            .map(|all| all.iter().map(|one| self.element(one)).collect())
            .unwrap_or_else(|| Err(Error::transport(format!("elements: {value}"))))
    }

    /// The first element `css` selects, once there is one; the last error
    /// after `timeout`.
    pub async fn wait_for(&self, css: &str, timeout: Duration) -> Result<Element> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            match self.find(css).await {
                Ok(element) => return Ok(element),
                Err(error) if tokio::time::Instant::now() >= deadline => return Err(error),
                Err(error) if error.code == "no such element" => {
                    tokio::time::sleep(Duration::from_millis(25)).await;
                }
                Err(error) => return Err(error),
            }
        }
    }

    fn element(&self, value: &Value) -> Result<Element> {
        let id = value[ELEMENT_KEY]
            .as_str()
            .ok_or_else(|| Error::transport(format!("not an element: {value}")))?;
        Ok(Element {
            client: self.clone(),
            id: id.to_string(),
        })
    }

    /// Presses and releases keys as the actions API describes them (one
    /// keyboard, its `keyDown`/`keyUp` in order).
    pub async fn keys(&self, actions: &[KeyAction]) -> Result<()> {
        let actions: Vec<Value> = actions
            .iter()
            .map(|action| match action {
                KeyAction::Down(key) => json!({ "type": "keyDown", "value": key.to_string() }),
                KeyAction::Up(key) => json!({ "type": "keyUp", "value": key.to_string() }),
            })
            .collect();
        self.post(
            "actions",
            json!({ "actions": [{ "type": "key", "id": "keyboard", "actions": actions }] }),
        )
        .await
        .map(drop)
    }

    /// The page as a PNG.
    pub async fn screenshot(&self) -> Result<Vec<u8>> {
        use base64::Engine as _;
        let value = self.get("screenshot").await?;
        base64::engine::general_purpose::STANDARD
            .decode(value.as_str().unwrap_or_default())
            .map_err(|e| Error::transport(format!("a screenshot that is not base64: {e}")))
    }

    pub async fn set_window_size(&self, width: u32, height: u32) -> Result<()> {
        self.post("window/rect", json!({ "width": width, "height": height }))
            .await
            .map(drop)
    }

    /// The current window's handle.
    pub async fn window(&self) -> Result<String> {
        let value = self.get("window").await?;
        Ok(value.as_str().unwrap_or_default().to_string())
    }

    /// Every window's handle.
    pub async fn windows(&self) -> Result<Vec<String>> {
        let value = self.get("window/handles").await?;
        Ok(value
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|handle| handle.as_str().map(str::to_string))
            .collect())
    }

    /// Opens a tab and returns its handle (the current window stays).
    pub async fn new_tab(&self) -> Result<String> {
        let value = self.post("window/new", json!({ "type": "tab" })).await?;
        Ok(value["handle"].as_str().unwrap_or_default().to_string())
    }

    pub async fn switch_to_window(&self, handle: &str) -> Result<()> {
        self.post("window", json!({ "handle": handle }))
            .await
            .map(drop)
    }

    /// Closes the current window.
    pub async fn close_window(&self) -> Result<()> {
        self.call(reqwest::Method::DELETE, "window", None)
            .await
            .map(drop)
    }
}

/// An element of the page.
#[derive(Clone)]
pub struct Element {
    client: Client,
    id: String,
}

impl Element {
    /// The driver's id of the element.
    pub fn element_id(&self) -> &str {
        &self.id
    }

    /// The element as a script argument.
    pub fn to_json(&self) -> Value {
        json!({ ELEMENT_KEY: self.id })
    }

    pub async fn click(&self) -> Result<()> {
        self.client
            .post(&format!("element/{}/click", self.id), json!({}))
            .await
            .map(drop)
    }

    /// Empties an input or a text area (the spec's Element Clear).
    pub async fn clear(&self) -> Result<()> {
        self.client
            .post(&format!("element/{}/clear", self.id), json!({}))
            .await
            .map(drop)
    }

    /// Types `text` into the element (focusing it first, as the spec's
    /// Element Send Keys does).
    pub async fn send_keys(&self, text: &str) -> Result<()> {
        self.client
            .post(
                &format!("element/{}/value", self.id),
                json!({ "text": text }),
            )
            .await
            .map(drop)
    }
}

/// One step of a keyboard action: a key (a character, or one of [`Key`]'s
/// code points) going down or up.
#[derive(Clone, Copy, Debug)]
pub enum KeyAction {
    Down(char),
    Up(char),
}

/// The keys without a character of their own, as WebDriver's code points
/// (the spec's table of "normalized key values").
#[derive(Clone, Copy, Debug)]
pub enum Key {
    Tab,
    Enter,
    Shift,
    Escape,
    Space,
}

impl From<Key> for char {
    fn from(key: Key) -> char {
        match key {
            Key::Tab => '\u{E004}',
            Key::Enter => '\u{E007}',
            Key::Shift => '\u{E008}',
            Key::Escape => '\u{E00C}',
            Key::Space => '\u{E00D}',
        }
    }
}
