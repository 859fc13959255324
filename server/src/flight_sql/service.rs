//! [`PetrelService`]: the `FlightService` actually served.
//!
//! It checks credentials on every call (Handshake excepted, which issues them), answers what
//! arrow-flight's blanket impl does not route — GetSchema, PollFlightInfo, CancelFlightInfo,
//! Set/GetSessionOptions, CloseSession — and delegates everything else to
//! [`PetrelFlightSql`].

use std::pin::Pin;
use std::sync::Arc;

use arrow_flight::flight_service_server::FlightService;
use arrow_flight::sql::{Any, Command};
use arrow_flight::{
    Action, ActionType, BasicAuth, CancelFlightInfoRequest, CancelFlightInfoResult, Criteria,
    Empty, FlightData, FlightDescriptor, FlightInfo, HandshakeRequest, HandshakeResponse, PollInfo,
    PutResult, SchemaResult, Ticket,
};
use futures::{Stream, StreamExt};
use prost::Message;
use tonic::metadata::MetadataValue;
use tonic::{Request, Response, Status, Streaming};

use crate::auth::Authenticator;
use crate::flight_sql::{PetrelFlightSql, cancel, poll};
use crate::proto::flight_session::{
    CloseSessionResult, GetSessionOptionsResult, SessionOptionValue, SetSessionOptionsRequest,
    SetSessionOptionsResult, close_session_result, session_option_value,
    set_session_options_result,
};
use crate::session::SESSION_COOKIE;
use crate::tickets::Tickets;

/// Longest session option value accepted (a catalog or schema name).
const MAX_SESSION_VALUE_BYTES: usize = 1024;

type BoxStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send + 'static>>;

/// Auth + the RPCs arrow-flight's `FlightSqlService` does not route, around
/// [`PetrelFlightSql`].
#[derive(Debug)]
pub struct PetrelService {
    inner: PetrelFlightSql,
    auth: Arc<Authenticator>,
}

impl PetrelService {
    /// Wraps `inner`, checking calls with `auth`.
    pub fn new(inner: PetrelFlightSql, auth: Arc<Authenticator>) -> Self {
        Self { inner, auth }
    }

    /// Checks the call's credentials and records who made it in the request's extensions
    /// (read by [`crate::flight_sql::caller`] for the query log, and binding its tickets).
    async fn check<T>(&self, request: &mut Request<T>) -> Result<(), Status> {
        let who = self
            .auth
            .check(request.metadata(), request.remote_addr())
            .await?;
        request.extensions_mut().insert(who);
        Ok(())
    }

    fn action_result(body: impl Message) -> Response<BoxStream<arrow_flight::Result>> {
        let r = arrow_flight::Result {
            body: body.encode_to_vec().into(),
        };
        Response::new(Box::pin(futures::stream::iter([Ok(r)])))
    }
}

#[tonic::async_trait]
impl FlightService for PetrelService {
    type HandshakeStream = BoxStream<HandshakeResponse>;
    type ListFlightsStream = BoxStream<FlightInfo>;
    type DoGetStream = BoxStream<FlightData>;
    type DoPutStream = BoxStream<PutResult>;
    type DoActionStream = BoxStream<arrow_flight::Result>;
    type ListActionsStream = BoxStream<ActionType>;
    type DoExchangeStream = BoxStream<FlightData>;

    async fn handshake(
        &self,
        request: Request<Streaming<HandshakeRequest>>,
    ) -> Result<Response<Self::HandshakeStream>, Status> {
        let metadata = request.metadata().clone();
        let peer = request.remote_addr();
        let mut stream = request.into_inner();
        // A payload (legacy BasicAuth message) is optional; header credentials are preferred.
        let payload = if metadata.get("authorization").is_none() {
            match stream.next().await {
                Some(Ok(req)) => BasicAuth::decode(req.payload)
                    .ok()
                    .filter(|b| !b.username.is_empty())
                    .map(|b| (b.username, b.password)),
                _ => None,
            }
        } else {
            None
        };
        let (_who, token) = self.auth.handshake(&metadata, payload, peer).await?;
        let out = HandshakeResponse {
            protocol_version: 0,
            payload: token.clone().into(),
        };
        let mut resp: Response<Self::HandshakeStream> =
            Response::new(Box::pin(futures::stream::iter([Ok(out)])));
        let value = MetadataValue::try_from(format!("Bearer {token}"))
            .map_err(|_| Status::internal("token is not a valid header value"))?;
        resp.metadata_mut().insert("authorization", value);
        Ok(resp)
    }

    async fn list_flights(
        &self,
        mut request: Request<Criteria>,
    ) -> Result<Response<Self::ListFlightsStream>, Status> {
        self.check(&mut request).await?;
        // Flights are per query; there is nothing standing to list.
        Ok(Response::new(Box::pin(futures::stream::empty())))
    }

    async fn get_flight_info(
        &self,
        mut request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        self.check(&mut request).await?;
        FlightService::get_flight_info(&self.inner, request).await
    }

    async fn poll_flight_info(
        &self,
        mut request: Request<FlightDescriptor>,
    ) -> Result<Response<PollInfo>, Status> {
        self.check(&mut request).await?;
        let who = crate::flight_sql::identity(&request);
        let tickets = Tickets::new(self.inner.ticket_signer(), &who);
        let polls = self.inner.polls();
        // A retry descriptor: the progress (or the result) of a query started before.
        if let Some(ticket) = poll::open_retry_descriptor(tickets, request.get_ref()) {
            return Ok(Response::new(polls.poll(tickets, &ticket?).await?));
        }
        // A statement query: started in the background (`poll`).
        if let Some(cmd) = poll::statement_query(request.get_ref()) {
            let engine = self.inner.engine().as_ref();
            let session = self.inner.sessions().current(&request);
            let user = crate::flight_sql::caller(&request);
            match poll::plan_query(engine, &cmd, session).await {
                Ok(Some((ticket, planned, slot))) => {
                    let Some(registration) = engine.cancellations().start(&ticket.query_id) else {
                        return Err(Status::internal("a fresh query id was cancelled"));
                    };
                    let pool = engine.options().memory.query_pool();
                    let info = polls
                        .start(tickets, ticket, planned, slot, registration, pool)
                        .await?;
                    return Ok(Response::new(info));
                }
                // A write: GetFlightInfo runs it once, below.
                Ok(None) => {}
                Err(status) => {
                    crate::telemetry::query_failed(None, &user, &cmd.query, &status);
                    return Err(status);
                }
            }
        }
        // Anything else (a write, a prepared statement, a metadata command) is complete at
        // once: its FlightInfo, as GetFlightInfo answers it.
        let info = FlightService::get_flight_info(&self.inner, request)
            .await?
            .into_inner();
        Ok(Response::new(PollInfo {
            info: Some(info),
            flight_descriptor: None,
            progress: Some(1.0),
            expiration_time: None,
        }))
    }

    async fn get_schema(
        &self,
        mut request: Request<FlightDescriptor>,
    ) -> Result<Response<SchemaResult>, Status> {
        self.check(&mut request).await?;
        // Describe only: a write is planned, not run.
        request
            .extensions_mut()
            .insert(super::statement::SchemaOnly);
        let info = FlightService::get_flight_info(&self.inner, request)
            .await?
            .into_inner();
        Ok(Response::new(SchemaResult {
            schema: info.schema,
        }))
    }

    async fn do_get(
        &self,
        mut request: Request<Ticket>,
    ) -> Result<Response<Self::DoGetStream>, Status> {
        self.check(&mut request).await?;
        // Reject tickets that are not Flight SQL commands with a clear message.
        if Any::decode(request.get_ref().ticket.clone())
            .ok()
            .and_then(|a| Command::try_from(a).ok())
            .is_none()
        {
            return Err(Status::invalid_argument(
                "malformed ticket: tickets come from GetFlightInfo",
            ));
        }
        FlightService::do_get(&self.inner, request).await
    }

    async fn do_put(
        &self,
        mut request: Request<Streaming<FlightData>>,
    ) -> Result<Response<Self::DoPutStream>, Status> {
        self.check(&mut request).await?;
        FlightService::do_put(&self.inner, request).await
    }

    async fn do_exchange(
        &self,
        mut request: Request<Streaming<FlightData>>,
    ) -> Result<Response<Self::DoExchangeStream>, Status> {
        self.check(&mut request).await?;
        Err(Status::unimplemented("DoExchange is not supported"))
    }

    async fn list_actions(
        &self,
        mut request: Request<Empty>,
    ) -> Result<Response<Self::ListActionsStream>, Status> {
        self.check(&mut request).await?;
        FlightService::list_actions(&self.inner, request).await
    }

    async fn do_action(
        &self,
        mut request: Request<Action>,
    ) -> Result<Response<Self::DoActionStream>, Status> {
        self.check(&mut request).await?;
        let sessions = self.inner.sessions();
        match request.get_ref().r#type.as_str() {
            "CancelFlightInfo" => {
                let req = CancelFlightInfoRequest::decode(request.get_ref().body.clone()).map_err(
                    |e| Status::invalid_argument(format!("malformed CancelFlightInfoRequest: {e}")),
                )?;
                let info = req.info.ok_or_else(|| {
                    Status::invalid_argument("CancelFlightInfoRequest has no info")
                })?;
                let who = crate::flight_sql::identity(&request);
                let tickets = Tickets::new(self.inner.ticket_signer(), &who);
                let status = cancel::cancel_info(self.inner.engine().as_ref(), tickets, &info)?;
                Ok(Self::action_result(CancelFlightInfoResult {
                    status: status as i32,
                }))
            }
            "SetSessionOptions" => {
                let req = SetSessionOptionsRequest::decode(request.get_ref().body.clone())
                    .map_err(|e| {
                        Status::invalid_argument(format!("malformed SetSessionOptionsRequest: {e}"))
                    })?;
                // (Never log the cookie or other headers: they are credentials.)
                tracing::debug!(options = ?req.session_options, "SetSessionOptions");
                let mut errors = std::collections::HashMap::new();
                let mut updates: Vec<(String, String)> = Vec::new();
                for (name, value) in req.session_options {
                    let key = match name.as_str() {
                        "catalog" => "catalog",
                        "schema" | "db_schema" => "schema",
                        _ => {
                            errors.insert(
                                name,
                                set_session_options_result::Error {
                                    value: set_session_options_result::ErrorValue::InvalidName
                                        as i32,
                                },
                            );
                            continue;
                        }
                    };
                    let known_catalog =
                        |c: &str| self.inner.engine().catalogs().iter().any(|(n, _)| n == c);
                    match value.option_value {
                        // A name, not a payload: a session keeps its values for hours. A
                        // catalog must be one this server serves.
                        Some(session_option_value::OptionValue::StringValue(s))
                            if s.len() <= MAX_SESSION_VALUE_BYTES
                                && !s.contains('\0')
                                && (key != "catalog" || s.is_empty() || known_catalog(&s)) =>
                        {
                            updates.push((key.to_string(), s))
                        }
                        None => updates.push((key.to_string(), String::new())),
                        Some(_) => {
                            errors.insert(
                                name,
                                set_session_options_result::Error {
                                    value: set_session_options_result::ErrorValue::InvalidValue
                                        as i32,
                                },
                            );
                        }
                    }
                }
                let new_id = sessions.update(&request, |d| {
                    for (k, v) in updates {
                        if k == "catalog" {
                            d.catalog = v;
                        } else {
                            d.schema = v;
                        }
                    }
                });
                let mut resp = Self::action_result(SetSessionOptionsResult { errors });
                if let Some(id) = new_id
                    && let Ok(v) = MetadataValue::try_from(format!("{SESSION_COOKIE}={id}"))
                {
                    resp.metadata_mut().insert("set-cookie", v);
                }
                Ok(resp)
            }
            "GetSessionOptions" => {
                let d = sessions.current(&request);
                let string = |s: String| SessionOptionValue {
                    option_value: Some(session_option_value::OptionValue::StringValue(s)),
                };
                let mut options = std::collections::HashMap::new();
                options.insert("catalog".to_string(), string(d.catalog));
                options.insert("schema".to_string(), string(d.schema));
                Ok(Self::action_result(GetSessionOptionsResult {
                    session_options: options,
                }))
            }
            "CloseSession" => {
                // Closing a session that was never opened (no options set) is not an error:
                // the JDBC driver closes on every disconnect.
                sessions.close(&request);
                Ok(Self::action_result(CloseSessionResult {
                    status: close_session_result::Status::Closed as i32,
                }))
            }
            _ => FlightService::do_action(&self.inner, request).await,
        }
    }
}
