//! The OpenAPI document against the server that serves it: a client generated from
//! `/openapi.json` must be able to trust it. Every example the document gives is a
//! request the server takes, and requests generated from the document's schemas are
//! taken when the schemas allow them and refused when they do not.
//!
//! "Taken" means not refused as malformed or invalid (400 or 422 with `malformed_*` or
//! `invalid_request`): a generated hotel id names no hotel, so most requests end in a
//! domain refusal (`unknown_hotel`, 404, 409), which says nothing against the document.
//! A 5xx is wrong either way.
//!
//! The document is read as JSON Schema by the `jsonschema` crate, not by our own code,
//! so a contradiction in it (a body no instance can satisfy) shows as a body that
//! cannot be generated. Rules JSON Schema cannot state (one field relative to another)
//! are the document's `x-` keywords (`api/src/schema.rs`), which the generator follows.
//! Generation is deterministic (proptest's fixed seed), so a failure repeats.

use std::collections::BTreeSet;

use chrono::{Days, NaiveDate, Utc};
use jsonschema::Validator;
use proptest::prelude::RngExt;
use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::TestRunner;
use reqwest::Method;
use serde_json::{json, Map, Value};

use crate::support::*;

/// Generated requests per operation, each way (allowed, forbidden).
const CASES: usize = 30;

/// Operations whose generated requests are only checked for what the schema forbids,
/// and why the rest cannot be: their acceptance depends on something outside the
/// request.
const NOT_GENERATED_ALLOWED: [(&str, &str, &str); 2] = [
    (
        "put",
        "/v1/webhooks/{subscription_id}",
        "the url must also reach a host the server may deliver to, which depends on its settings and DNS",
    ),
    (
        "get",
        "/v1/audit/verify",
        "no input to vary, and it replays the whole history",
    ),
];

#[tokio::test]
async fn every_documented_example_is_accepted_and_what_the_schema_forbids_is_refused() {
    let app = spawn_app().await;
    let doc = openapi(&app).await;
    let contract = Contract::new(doc);
    let mut runner = TestRunner::deterministic();
    let mut failures = Vec::new();

    failures.extend(contract.examples_fit_their_schemas());
    for op in contract.operations() {
        if let Some(request) = contract.example_request(&op, &mut runner) {
            let reply = request.send(&app, ADMIN).await;
            if let Some(problem) = refused_as_invalid(&reply) {
                failures.push(format!(
                    "{} {}: its documented example was {problem}\n  {request}",
                    op.method, op.path
                ));
            }
        }
        let skipped = NOT_GENERATED_ALLOWED
            .iter()
            .any(|(m, p, _)| *m == op.method && *p == op.path);
        for case in 0..CASES {
            let token = [ADMIN, WEB, AUDITOR][case % 3];
            let allowed = match contract.allowed_request(&op, &mut runner) {
                Ok(request) => request,
                Err(why) => {
                    failures.push(format!("{} {}: {why}", op.method, op.path));
                    break;
                }
            };
            if !skipped {
                let reply = allowed.send(&app, token).await;
                if let Some(problem) = refused_as_invalid(&reply) {
                    failures.push(format!(
                        "{} {}: a request the schema allows was {problem}\n  {allowed}",
                        op.method, op.path
                    ));
                }
            }
            if let Some(forbidden) = contract.forbidden_request(&op, &allowed, &mut runner) {
                let reply = forbidden.request.send(&app, token).await;
                if !(400..500).contains(&reply.status.as_u16()) {
                    failures.push(format!(
                        "{} {}: a request the schema forbids ({}) was answered {} {}\n  {}",
                        op.method,
                        op.path,
                        forbidden.why,
                        reply.status,
                        reply.text,
                        forbidden.request
                    ));
                }
            }
        }
    }

    assert!(
        failures.is_empty(),
        "{} disagreements between /openapi.json and the server:\n{}",
        failures.len(),
        failures.join("\n")
    );
    app.finish().await;
}

/// Refusals as `invalid_request` that depend on what is stored, not on the request:
/// the document says them in words (`rate_cents`: "required for nights without a rate
/// yet"). Generated ids name hotels that earlier generated requests created, so these
/// are met.
const STORED_STATE_RULES: [&str; 2] = [
    "has no rate yet: rate_cents is required",
    "has no inventory yet: total_rooms is required",
];

/// What is wrong with an answer to a request the document allows: a 5xx, or a
/// refusal as malformed or invalid.
fn refused_as_invalid(reply: &Reply) -> Option<String> {
    let status = reply.status.as_u16();
    let code = reply.json["error"].as_str().unwrap_or_default();
    let message = reply.json["message"].as_str().unwrap_or_default();
    if STORED_STATE_RULES.iter().any(|rule| message.contains(rule)) {
        return None;
    }
    let invalid = matches!(
        code,
        "invalid_request" | "malformed_request" | "malformed_json" | "unsupported_media_type"
    );
    if status >= 500 || ((status == 400 || status == 422) && invalid) || status == 415 {
        Some(format!("answered {status} {}", reply.text))
    } else {
        None
    }
}

/// One operation of the document.
struct Operation {
    method: String,
    path: String,
    parameters: Vec<Value>,
    body: Option<Value>,
}

/// A request built from the document.
#[derive(Clone)]
struct Request {
    method: String,
    path: String,
    query: Vec<(String, String)>,
    headers: Vec<(String, String)>,
    body: Option<Value>,
}

impl std::fmt::Display for Request {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.method.to_uppercase(), self.path)?;
        if !self.query.is_empty() {
            write!(f, " query {:?}", self.query)?;
        }
        if !self.headers.is_empty() {
            write!(f, " headers {:?}", self.headers)?;
        }
        if let Some(body) = &self.body {
            write!(f, " body {body}")?;
        }
        Ok(())
    }
}

impl Request {
    async fn send(&self, app: &TestApp, token: &str) -> Reply {
        let method = Method::from_bytes(self.method.to_uppercase().as_bytes()).expect("method");
        let mut builder = app
            .request(method, &self.path, Some(token))
            .query(&self.query);
        for (name, value) in &self.headers {
            builder = builder.header(name, value);
        }
        if let Some(body) = &self.body {
            builder = builder.json(body);
        }
        app.send(builder).await
    }
}

/// A request the schema forbids, and which rule it breaks.
struct Forbidden {
    request: Request,
    why: String,
}

struct Contract {
    doc: Value,
    today: NaiveDate,
}

impl Contract {
    fn new(doc: Value) -> Self {
        Self {
            doc,
            today: Utc::now().date_naive(),
        }
    }

    fn operations(&self) -> Vec<Operation> {
        let mut ops = Vec::new();
        for (path, item) in self.doc["paths"].as_object().expect("paths") {
            for (method, op) in item.as_object().expect("path item") {
                let body = op["requestBody"]["content"]["application/json"]["schema"].clone();
                ops.push(Operation {
                    method: method.clone(),
                    path: path.clone(),
                    parameters: op["parameters"].as_array().cloned().unwrap_or_default(),
                    body: (!body.is_null()).then_some(body),
                });
            }
        }
        ops
    }

    /// `schema` with `$ref`s followed.
    fn resolve<'a>(&'a self, schema: &'a Value) -> &'a Value {
        match schema["$ref"].as_str() {
            Some(reference) => {
                let name = reference
                    .strip_prefix("#/components/schemas/")
                    .expect("a reference to a component schema");
                self.resolve(&self.doc["components"]["schemas"][name])
            }
            None => schema,
        }
    }

    /// A validator of `schema`, its references resolved against the document.
    fn validator(&self, schema: &Value) -> Validator {
        let mut root = match schema {
            Value::Object(map) => map.clone(),
            Value::Bool(b) => return jsonschema::validator_for(&json!(b)).expect("boolean"),
            other => panic!("not a schema: {other}"),
        };
        root.insert("components".into(), self.doc["components"].clone());
        jsonschema::draft202012::options()
            .should_validate_formats(true)
            .build(&Value::Object(root))
            .unwrap_or_else(|e| panic!("the document's schema {schema} does not compile: {e}"))
    }

    fn valid(&self, schema: &Value, value: &Value) -> bool {
        self.validator(schema).is_valid(value)
    }

    /// Every `example` and `examples` value of the document's request schemas and
    /// parameters fits the schema it is given in.
    fn examples_fit_their_schemas(&self) -> Vec<String> {
        let mut failures = Vec::new();
        let mut check = |at: &str, schema: &Value| {
            walk(schema, &mut |sub: &Value| {
                let examples = sub["examples"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
                    .into_iter()
                    .chain(sub.get("example").cloned());
                for example in examples {
                    if !self.valid(sub, &example) {
                        failures.push(format!(
                            "{at}: the example {example} does not fit its own schema {sub}"
                        ));
                    }
                }
            });
        };
        for op in self.operations() {
            let at = format!("{} {}", op.method, op.path);
            for parameter in &op.parameters {
                check(&at, &parameter["schema"]);
            }
            if let Some(body) = &op.body {
                check(&at, self.resolve(body));
            }
        }
        for (name, schema) in self.doc["components"]["schemas"]
            .as_object()
            .expect("schemas")
        {
            check(name, schema);
        }
        failures
    }

    /// The operation's documented examples put together (what is not given an example
    /// generated); `None` when it documents none.
    fn example_request(&self, op: &Operation, runner: &mut TestRunner) -> Option<Request> {
        let mut any = false;
        let mut params = Map::new();
        let groups = exactly_one_groups(&op.parameters);
        for parameter in &op.parameters {
            let name = parameter["name"].as_str().expect("name").to_owned();
            let schema = &parameter["schema"];
            // Of a group of which exactly one is given, the first.
            if groups.iter().any(|g| g.contains(&name) && g[0] != name) {
                continue;
            }
            match example_of(schema) {
                Some(example) => {
                    any = true;
                    params.insert(name, example);
                }
                None if parameter["required"] == json!(true) => {
                    params.insert(name, self.generate(schema, runner, 0));
                }
                None => {}
            }
        }
        self.follow_rules(&op.parameters_as_properties(), &mut params, runner);
        let body = op.body.as_ref().map(|schema| {
            let schema = self.resolve(schema);
            if let Some(example) = example_of(schema) {
                any = true;
                return example;
            }
            let mut body = self.generate(schema, runner, 0);
            if let Some(object) = body.as_object_mut() {
                let props = properties(self, schema);
                for (name, property) in &props {
                    if let Some(example) = example_of(self.resolve(property)) {
                        any = true;
                        object.insert(name.clone(), example);
                    }
                }
                self.follow_rules(&props, object, runner);
            }
            body
        });
        any.then(|| self.request(op, &params, body))
    }

    /// A request every schema of the operation allows (its body validated by
    /// `jsonschema`; a schema nothing satisfies is reported as such).
    fn allowed_request(&self, op: &Operation, runner: &mut TestRunner) -> Result<Request, String> {
        let mut params = Map::new();
        // Of a group of which exactly one is given, one member chosen beforehand.
        let chosen: Vec<(Vec<String>, String)> = exactly_one_groups(&op.parameters)
            .into_iter()
            .map(|group| {
                let one = group[runner.rng().random_range(0..group.len())].clone();
                (group, one)
            })
            .collect();
        for parameter in &op.parameters {
            let name = parameter["name"].as_str().expect("name").to_owned();
            let include = match chosen.iter().find(|(group, _)| group.contains(&name)) {
                Some((_, one)) => *one == name,
                None => parameter["required"] == json!(true) || runner.rng().random_bool(0.5),
            };
            if include {
                let schema = &parameter["schema"];
                let validator = self.validator(schema);
                let value = (0..100)
                    .map(|_| self.generate(schema, runner, 0))
                    .find(|value| validator.is_valid(value))
                    .ok_or_else(|| {
                        format!("no value of {name} its schema {schema} allows could be generated")
                    })?;
                params.insert(name, value);
            }
        }
        self.follow_rules(&op.parameters_as_properties(), &mut params, runner);
        for parameter in &op.parameters {
            let name = parameter["name"].as_str().expect("name");
            if let Some(value) = params.get(name) {
                if !self.valid(&parameter["schema"], value) {
                    return Err(format!(
                        "generated parameter {name} = {value} does not fit its schema {}",
                        parameter["schema"]
                    ));
                }
            }
        }
        let body = match &op.body {
            None => None,
            Some(schema) => {
                let schema = self.resolve(schema);
                let validator = self.validator(schema);
                let found = (0..200)
                    .map(|_| self.generate(schema, runner, 0))
                    .find(|body| validator.is_valid(body));
                match found {
                    Some(body) => Some(body),
                    None => {
                        return Err(format!(
                            "no body its schema allows could be generated in 200 tries (does the schema contradict itself?): {schema}"
                        ))
                    }
                }
            }
        };
        Ok(self.request(op, &params, body))
    }

    /// `allowed` changed in one place so that the schema no longer allows it.
    fn forbidden_request(
        &self,
        op: &Operation,
        allowed: &Request,
        runner: &mut TestRunner,
    ) -> Option<Forbidden> {
        // The body when there is one, else a parameter; each mutation is checked to be
        // one the schema forbids.
        for _ in 0..20 {
            if let (Some(schema), Some(body)) = (&op.body, &allowed.body) {
                if runner.rng().random_bool(0.7) {
                    let schema = self.resolve(schema);
                    let mut body = body.clone();
                    if let Some(why) = self.break_value(schema, &mut body, runner) {
                        if !self.valid(schema, &body) {
                            let mut request = allowed.clone();
                            request.body = Some(body);
                            return Some(Forbidden { request, why });
                        }
                    }
                    continue;
                }
            }
            let parameters: Vec<&Value> = op
                .parameters
                .iter()
                .filter(|p| p["in"] != json!("header") || p["name"] == json!("Idempotency-Key"))
                .collect();
            if parameters.is_empty() {
                continue;
            }
            let parameter = parameters[runner.rng().random_range(0..parameters.len())];
            let name = parameter["name"].as_str().expect("name");
            let schema = &parameter["schema"];
            let mut params = allowed.params(op);
            let why = if parameter["required"] == json!(true) && runner.rng().random_bool(0.2) {
                params.remove(name);
                format!("{name} is required and missing")
            } else {
                let mut value = params
                    .get(name)
                    .cloned()
                    .unwrap_or_else(|| self.generate(schema, runner, 0));
                match self
                    .break_scalar(schema, &mut value, runner)
                    .filter(|why| why != "a number for text")
                {
                    // A header value HTTP cannot carry is not a request at all.
                    Some(why)
                        if !self.valid(schema, &value)
                            && as_text(&value).is_some_and(|text| {
                                parameter["in"] != json!("header")
                                    || reqwest::header::HeaderValue::from_str(&text).is_ok()
                            }) =>
                    {
                        params.insert(name.to_owned(), value);
                        format!("{name}: {why}")
                    }
                    _ => continue,
                }
            };
            // A path without one of its segments is another route, not this request.
            if parameter["in"] == json!("path") && !params.contains_key(name) {
                continue;
            }
            let request = self.request(op, &params, allowed.body.clone());
            return Some(Forbidden { request, why });
        }
        None
    }

    /// A request with these parameters (by name) and body.
    fn request(&self, op: &Operation, params: &Map<String, Value>, body: Option<Value>) -> Request {
        let mut path = op.path.clone();
        let mut query = Vec::new();
        let mut headers = Vec::new();
        for parameter in &op.parameters {
            let name = parameter["name"].as_str().expect("name");
            let Some(value) = params.get(name).and_then(as_text) else {
                continue;
            };
            match parameter["in"].as_str() {
                Some("path") => {
                    let encoded: String =
                        form_urlencoded::byte_serialize(value.as_bytes()).collect();
                    path = path.replace(&format!("{{{name}}}"), &encoded.replace('+', "%20"));
                }
                Some("query") => query.push((name.to_owned(), value)),
                Some("header") => headers.push((name.to_owned(), value)),
                _ => {}
            }
        }
        Request {
            method: op.method.clone(),
            path,
            query,
            headers,
            body,
        }
    }

    /// A value `schema` allows (before the rules between fields, which
    /// [`Contract::follow_rules`] applies to an object's fields).
    fn generate(&self, schema: &Value, runner: &mut TestRunner, depth: usize) -> Value {
        let schema = self.resolve(schema);
        assert!(depth < 12, "schema nested too deep: {schema}");
        if let Some(choices) = schema["oneOf"].as_array().or(schema["anyOf"].as_array()) {
            if schema.get("type").is_none() && schema.get("properties").is_none() {
                let branch = &choices[runner.rng().random_range(0..choices.len())];
                return self.generate(branch, runner, depth + 1);
            }
        }
        if let Some(parts) = schema["allOf"].as_array() {
            // The parts that describe the object, merged; the others (`anyOf` of
            // required fields) are left to the validator to enforce.
            let mut merged = json!({"type": "object", "properties": {}, "required": []});
            for part in parts {
                let part = self.resolve(part);
                if let Some(props) = part["properties"].as_object() {
                    for (k, v) in props {
                        merged["properties"][k] = v.clone();
                    }
                }
                if let Some(required) = part["required"].as_array() {
                    merged["required"]
                        .as_array_mut()
                        .expect("array")
                        .extend(required.iter().cloned());
                }
            }
            return self.generate(&merged, runner, depth + 1);
        }
        if let Some(values) = schema["enum"].as_array() {
            return values[runner.rng().random_range(0..values.len())].clone();
        }
        let types: Vec<&str> = match &schema["type"] {
            Value::String(t) => vec![t.as_str()],
            Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
            _ => vec!["object"],
        };
        let non_null: Vec<&str> = types.iter().copied().filter(|t| *t != "null").collect();
        if non_null.is_empty() || (types.contains(&"null") && runner.rng().random_bool(0.15)) {
            return Value::Null;
        }
        let rng_pick = runner.rng().random_range(0..non_null.len());
        match non_null[rng_pick] {
            "string" => self.string(schema, runner),
            "integer" => {
                let min = schema["minimum"].as_i64().unwrap_or(-(1 << 53));
                let max = schema["maximum"].as_i64().unwrap_or(1 << 53);
                let rng = runner.rng();
                let value = match rng.random_range(0..4) {
                    0 => min,
                    1 => max,
                    // Small values too: the ones rules between fields compare.
                    2 => rng.random_range(min..=max.min(min.saturating_add(20))),
                    _ => rng.random_range(min..=max),
                };
                json!(value)
            }
            "number" => {
                let low = schema["exclusiveMinimum"].as_f64().unwrap_or(-1e6);
                let high = schema["exclusiveMaximum"]
                    .as_f64()
                    .or(schema["maximum"].as_f64())
                    .unwrap_or(1e6);
                let x: f64 = runner.rng().random_range(0.001..0.999);
                let value = low + (high - low) * x;
                match schema["multipleOf"].as_f64() {
                    // A whole number of steps strictly above the low bound: as the
                    // decimal it is (`k / steps_per_unit`, the nearest float to it).
                    Some(step) if step > 0.0 => {
                        let per_unit = (1.0 / step).round();
                        let k = (value * per_unit)
                            .round()
                            .max((low * per_unit).floor() + 1.0);
                        json!(k / per_unit)
                    }
                    _ => json!(value),
                }
            }
            "boolean" => json!(runner.rng().random_bool(0.5)),
            "array" => {
                let min = schema["minItems"].as_u64().unwrap_or(0) as usize;
                let max = schema["maxItems"].as_u64().map_or(min + 3, |m| m as usize);
                let len = runner.rng().random_range(min..=max.min(min + 3));
                let mut items: Vec<Value> = Vec::new();
                let unique = schema["uniqueItems"] == json!(true);
                // `x-unique-by`: no two items with the same value of that field.
                let unique_by = schema["x-unique-by"].as_str();
                for _ in 0..len * 10 {
                    if items.len() == len {
                        break;
                    }
                    let item = self.generate(&schema["items"], runner, depth + 1);
                    let repeats = match unique_by {
                        Some(field) => items.iter().any(|i| i[field] == item[field]),
                        None => unique && items.contains(&item),
                    };
                    if !repeats {
                        items.push(item);
                    }
                }
                Value::Array(items)
            }
            _ => {
                let mut object = Map::new();
                let required: BTreeSet<&str> = schema["required"]
                    .as_array()
                    .map(|r| r.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                if let Some(props) = schema["properties"].as_object() {
                    for (name, property) in props {
                        if required.contains(name.as_str()) || runner.rng().random_bool(0.5) {
                            object.insert(name.clone(), self.generate(property, runner, depth + 1));
                        }
                    }
                }
                let props = schema["properties"]
                    .as_object()
                    .cloned()
                    .unwrap_or_default();
                self.follow_rules(&props, &mut object, runner);
                Value::Object(object)
            }
        }
    }

    fn string(&self, schema: &Value, runner: &mut TestRunner) -> Value {
        let min = schema["minLength"].as_u64().unwrap_or(0) as usize;
        // Without a bound, a pattern says how long; plain text is kept short.
        let unbounded = if schema["pattern"].is_string() {
            usize::MAX
        } else {
            min + 20
        };
        let max = schema["maxLength"]
            .as_u64()
            .map_or(unbounded, |m| m as usize);
        match schema["format"].as_str() {
            Some("date") => {
                // Anywhere in the years taken, mostly near today (where ranges are).
                let rng = runner.rng();
                let date = if rng.random_bool(0.3) {
                    let days = rng.random_range(0..=(8099 * 365));
                    NaiveDate::from_ymd_opt(1900, 1, 1).expect("date")
                        + chrono::Duration::days(days)
                } else {
                    self.today + chrono::Duration::days(rng.random_range(-400..=800))
                };
                return json!(date.to_string());
            }
            Some("uuid") => return json!(uuid::Uuid::new_v4().to_string()),
            Some("date-time") => {
                // An instant in the past (the only instants a request gives are moments
                // of the log: `as_known_at`, which the document says is not ahead).
                let seconds = runner.rng().random_range(0..=(400 * 86_400));
                let at = chrono::Utc::now() - chrono::Duration::seconds(seconds);
                return json!(at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true));
            }
            _ => {}
        }
        let pattern = schema["pattern"].as_str().map(|p| {
            p.strip_prefix('^')
                .unwrap_or(p)
                .strip_suffix('$')
                .unwrap_or(p)
                .to_owned()
        });
        for _ in 0..100 {
            let text = match &pattern {
                Some(pattern) => {
                    let strategy = proptest::string::string_regex(pattern)
                        .unwrap_or_else(|e| panic!("pattern {pattern}: {e}"));
                    strategy.new_tree(runner).expect("a value").current()
                }
                None => {
                    let len = runner.rng().random_range(min..=max.min(min + 30));
                    (0..len)
                        .map(|_| char::from(runner.rng().random_range(b'a'..=b'z')))
                        .collect()
                }
            };
            let chars = text.chars().count();
            if (min..=max).contains(&chars) {
                return json!(text);
            }
        }
        panic!("no string of {schema} could be generated");
    }

    /// Applies the document's rules between fields (`x-days-from-today`,
    /// `x-days-after`, `x-days-before`, `x-not-above`) to the fields of one object (or
    /// query).
    fn follow_rules(
        &self,
        properties: &Map<String, Value>,
        object: &mut Map<String, Value>,
        runner: &mut TestRunner,
    ) {
        for (name, schema) in properties {
            let rule = &schema["x-days-from-today"];
            if let (Some(min), Some(max), Some(Value::String(_))) = (
                rule["minimum"].as_i64(),
                rule["maximum"].as_i64(),
                object.get(name),
            ) {
                // A day clear of either end: "today" is the hotel's, in its timezone.
                let days = runner.rng().random_range(min + 1..=max - 1);
                object.insert(
                    name.clone(),
                    json!((self.today + chrono::Duration::days(days)).to_string()),
                );
            }
        }
        for (name, schema) in properties {
            let rule = &schema["x-days-after"];
            let Some(field) = rule["field"].as_str() else {
                continue;
            };
            let start = object
                .get(field)
                .and_then(Value::as_str)
                .and_then(|s| s.parse::<NaiveDate>().ok());
            if let (Some(start), true) = (start, object.contains_key(name)) {
                let min = rule["minimum"].as_i64().unwrap_or(1);
                let max = rule["maximum"].as_i64().unwrap_or(min + 30);
                let days = runner.rng().random_range(min..=max.min(min + 40));
                let last = NaiveDate::from_ymd_opt(9999, 12, 31).expect("date");
                let end = start
                    .checked_add_days(Days::new(days as u64))
                    .filter(|end| *end <= last);
                match end {
                    Some(end) => {
                        object.insert(name.clone(), json!(end.to_string()));
                    }
                    None => {
                        // At the end of the calendar: the range moves back.
                        let start = last - chrono::Duration::days(days);
                        object.insert(field.to_owned(), json!(start.to_string()));
                        object.insert(name.clone(), json!(last.to_string()));
                    }
                }
            }
        }
        for (name, schema) in properties {
            // Before another date (and, by `x-days-from-today`, not before today).
            let rule = &schema["x-days-before"];
            let Some(field) = rule["field"].as_str() else {
                continue;
            };
            let end = object
                .get(field)
                .and_then(Value::as_str)
                .and_then(|s| s.parse::<NaiveDate>().ok());
            if let (Some(end), true) = (end, object.contains_key(name)) {
                let min = rule["minimum"].as_i64().unwrap_or(1);
                let latest = end - chrono::Duration::days(min);
                let span = (latest - self.today).num_days().max(0);
                let days = runner.rng().random_range(0..=span);
                object.insert(
                    name.clone(),
                    json!((self.today + chrono::Duration::days(days)).to_string()),
                );
            }
        }
        for (name, schema) in properties {
            let Some(other) = schema["x-not-above"].as_str() else {
                continue;
            };
            let limit = match object.get(other) {
                Some(Value::Number(n)) => n.as_i64(),
                Some(Value::Null) | None => {
                    properties.get(other).and_then(|s| s["default"].as_i64())
                }
                _ => None,
            };
            // This field's value, or the default it takes when left out.
            let value = match object.get(name) {
                Some(Value::Number(n)) => n.as_i64(),
                Some(Value::Null) | None => schema["default"].as_i64(),
                _ => None,
            };
            if let (Some(value), Some(limit)) = (value, limit) {
                if value > limit {
                    object.insert(name.clone(), json!(limit));
                }
            }
        }
    }

    /// Breaks one field of `value` (an object) or `value` itself so that `schema` no
    /// longer allows it; says how.
    fn break_value(
        &self,
        schema: &Value,
        value: &mut Value,
        runner: &mut TestRunner,
    ) -> Option<String> {
        let schema = self.resolve(schema);
        let props = properties(self, schema);
        let Some(object) = value.as_object_mut() else {
            return self.break_scalar(schema, value, runner);
        };
        let required = required_of(self, schema);
        let names: Vec<String> = props.keys().cloned().collect();
        if names.is_empty() {
            return None;
        }
        let name = names[runner.rng().random_range(0..names.len())].clone();
        let property = self.resolve(&props[&name]).clone();
        match runner.rng().random_range(0..5) {
            0 if required.contains(&name) => {
                object.remove(&name);
                Some(format!("{name} is required and missing"))
            }
            1 if property["x-days-after"].is_object() => {
                let field = property["x-days-after"]["field"].as_str()?;
                let start = object.get(field)?.clone();
                object.insert(name.clone(), start);
                Some(format!("{name} is not after {field}"))
            }
            2 if property["x-days-after"]["maximum"].is_i64() => {
                let rule = &property["x-days-after"];
                let field = rule["field"].as_str()?;
                let start: NaiveDate = object.get(field)?.as_str()?.parse().ok()?;
                let end = start.checked_add_days(Days::new(rule["maximum"].as_u64()? + 1))?;
                object.insert(name.clone(), json!(end.to_string()));
                Some(format!(
                    "{name} is more than {} days after {field}",
                    rule["maximum"]
                ))
            }
            _ => {
                let mut field = object.get(&name).cloned().unwrap_or(Value::Null);
                let why = match object.get(&name) {
                    Some(inner) if inner.is_object() || property.get("allOf").is_some() => {
                        let mut inner = inner.clone();
                        let why = self.break_value(&property, &mut inner, runner)?;
                        field = inner;
                        why
                    }
                    _ => self.break_scalar(&property, &mut field, runner)?,
                };
                object.insert(name.clone(), field);
                Some(format!("{name}: {why}"))
            }
        }
    }

    /// A value of the wrong kind for `schema`, or out of its bounds.
    fn break_scalar(
        &self,
        schema: &Value,
        value: &mut Value,
        runner: &mut TestRunner,
    ) -> Option<String> {
        let schema = self.resolve(schema);
        let types: Vec<&str> = match &schema["type"] {
            Value::String(t) => vec![t.as_str()],
            Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        let mut options: Vec<(Value, String)> = Vec::new();
        if let Some(max) = schema["maximum"].as_i64() {
            options.push((json!(max + 1), format!("above its maximum {max}")));
        }
        if let Some(min) = schema["minimum"].as_i64() {
            options.push((json!(min - 1), format!("below its minimum {min}")));
        }
        if let Some(max) = schema["exclusiveMaximum"].as_f64() {
            options.push((json!(max), format!("not below {max}")));
        }
        if let Some(max) = schema["maxLength"].as_u64() {
            options.push((
                json!("a".repeat(max as usize + 1)),
                format!("longer than {max}"),
            ));
        }
        if schema["minLength"].as_u64().is_some_and(|m| m > 0) {
            options.push((json!(""), "empty".to_owned()));
        }
        if schema["format"] == json!("date") {
            options.push((json!("2027-02-30"), "a day that does not exist".to_owned()));
            options.push((json!("1899-12-31"), "a year before 1900".to_owned()));
        }
        if schema["pattern"].is_string() {
            options.push((json!("\u{1}"), "a control character".to_owned()));
        }
        if schema["enum"].is_array() {
            options.push((json!("no-such-value"), "not one of its values".to_owned()));
        }
        if types.contains(&"integer") || types.contains(&"number") {
            options.push((json!("twelve"), "text for a number".to_owned()));
        }
        if types.contains(&"string") && !types.contains(&"integer") {
            options.push((json!(12345), "a number for text".to_owned()));
        }
        if types.contains(&"array") {
            if let Some(max) = schema["maxItems"].as_u64().filter(|m| *m < 50) {
                let item = self.generate(&schema["items"], runner, 0);
                options.push((
                    json!(vec![item; max as usize + 1]),
                    format!("more than {max} items"),
                ));
            }
            if schema["minItems"].as_u64().is_some_and(|m| m > 0) {
                options.push((json!([]), "no items".to_owned()));
            }
            if let Value::Array(items) = value.clone() {
                if !items.is_empty() {
                    let mut items = items;
                    let index = runner.rng().random_range(0..items.len());
                    if self
                        .break_scalar(&schema["items"], &mut items[index], runner)
                        .is_some()
                    {
                        options.push((json!(items), format!("item {index} broken")));
                    }
                }
            }
        }
        if options.is_empty() {
            return None;
        }
        let (broken, why) = options.swap_remove(runner.rng().random_range(0..options.len()));
        *value = broken;
        Some(why)
    }
}

impl Operation {
    /// The parameters' schemas by name (the rules between fields name them).
    fn parameters_as_properties(&self) -> Map<String, Value> {
        self.parameters
            .iter()
            .filter_map(|p| Some((p["name"].as_str()?.to_owned(), p["schema"].clone())))
            .collect()
    }
}

impl Request {
    /// The parameters this request was built with, by name, as text.
    fn params(&self, op: &Operation) -> Map<String, Value> {
        let mut params = Map::new();
        for (name, value) in self.query.iter().chain(&self.headers) {
            params.insert(name.clone(), json!(value));
        }
        // Path parameters, read back from the path's segments.
        let template: Vec<&str> = op.path.split('/').collect();
        let actual: Vec<&str> = self.path.split('/').collect();
        for (t, a) in template.iter().zip(&actual) {
            if let Some(name) = t.strip_prefix('{').and_then(|t| t.strip_suffix('}')) {
                let decoded: String = form_urlencoded::parse(format!("x={a}").as_bytes())
                    .next()
                    .map(|(_, v)| v.into_owned())
                    .unwrap_or_default();
                let schema = op
                    .parameters
                    .iter()
                    .find(|p| p["name"] == json!(name))
                    .map(|p| &p["schema"]);
                let value = match schema.map(|s| &s["type"]) {
                    Some(Value::String(t)) if t == "integer" => decoded
                        .parse::<i64>()
                        .map(|n| json!(n))
                        .unwrap_or(json!(decoded)),
                    _ => json!(decoded),
                };
                params.insert(name.to_owned(), value);
            }
        }
        params
    }
}

/// A parameter's or a body's value as the text it travels as.
fn as_text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// The documented example of a schema, if it has one.
fn example_of(schema: &Value) -> Option<Value> {
    schema["examples"]
        .as_array()
        .and_then(|e| e.first().cloned())
        .or_else(|| schema.get("example").cloned())
}

/// An object schema's properties, through `allOf` and `$ref`.
fn properties(contract: &Contract, schema: &Value) -> Map<String, Value> {
    let schema = contract.resolve(schema);
    let mut props = schema["properties"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    for part in schema["allOf"].as_array().into_iter().flatten() {
        props.extend(properties(contract, part));
    }
    props
}

fn required_of(contract: &Contract, schema: &Value) -> BTreeSet<String> {
    let schema = contract.resolve(schema);
    let mut required: BTreeSet<String> = schema["required"]
        .as_array()
        .map(|r| {
            r.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    for part in schema["allOf"].as_array().into_iter().flatten() {
        if contract.resolve(part)["properties"].is_object() {
            required.extend(required_of(contract, part));
        }
    }
    required
}

/// The groups of parameters of which exactly one is to be given (`x-exactly-one-of`).
fn exactly_one_groups(parameters: &[Value]) -> Vec<Vec<String>> {
    let mut groups: Vec<Vec<String>> = Vec::new();
    for parameter in parameters {
        if let Some(group) = parameter["schema"]["x-exactly-one-of"].as_array() {
            let group: Vec<String> = group
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect();
            if !groups.contains(&group) {
                groups.push(group);
            }
        }
    }
    groups
}

/// Calls `visit` on `schema` and every schema inside it.
fn walk(schema: &Value, visit: &mut impl FnMut(&Value)) {
    visit(schema);
    for key in ["items", "not"] {
        if schema[key].is_object() {
            walk(&schema[key], visit);
        }
    }
    for key in ["allOf", "anyOf", "oneOf"] {
        for part in schema[key].as_array().into_iter().flatten() {
            walk(part, visit);
        }
    }
    for property in schema["properties"]
        .as_object()
        .into_iter()
        .flat_map(|p| p.values())
    {
        walk(property, visit);
    }
}

#[tokio::test]
async fn every_route_that_reaches_the_database_documents_its_503_in_the_error_shape() {
    let app = spawn_app().await;
    let doc = openapi(&app).await;

    let mut documented = 0;
    let mut wrong = Vec::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, operation) in item.as_object().expect("operations") {
            let Some(unavailable) = operation["responses"].get("503") else {
                continue;
            };
            documented += 1;
            let schema = &unavailable["content"]["application/json"]["schema"]["$ref"];
            let described = unavailable["description"].as_str().unwrap_or_default();
            if schema != "#/components/schemas/ErrorBody" || described.is_empty() {
                wrong.push(format!("{method} {path}: {unavailable}"));
            }
        }
    }

    assert!(
        documented >= 39,
        "only {documented} operations document a 503"
    );
    assert!(wrong.is_empty(), "{wrong:#?}");
    app.finish().await;
}

#[tokio::test]
async fn every_idempotent_route_documents_its_idempotency_key_header_alike() {
    let app = spawn_app().await;
    let doc = openapi(&app).await;

    let mut headers = Vec::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, operation) in item.as_object().expect("operations") {
            for param in operation["parameters"].as_array().into_iter().flatten() {
                if param["name"] == "Idempotency-Key" {
                    headers.push((format!("{method} {path}"), param.clone()));
                }
            }
        }
    }

    assert!(
        headers.len() >= 8,
        "{} routes document the header",
        headers.len()
    );
    for (route, param) in &headers {
        assert_eq!(param["in"], "header", "{route}");
        assert_eq!(param["required"], true, "{route}");
        assert_eq!(param["schema"]["maxLength"], 255, "{route}: {param}");
        assert_eq!(param["schema"]["pattern"], "^[ -~]+$", "{route}: {param}");
        assert_eq!(
            param, &headers[0].1,
            "{route} differs from {}",
            headers[0].0
        );
    }
    app.finish().await;
}

/// The server's OpenAPI document.
async fn openapi(app: &TestApp) -> serde_json::Value {
    app.get("/openapi.json", None)
        .await
        .assert_status(200)
        .clone()
}
