//! The Flight SQL service.
//!
//! [`PetrelFlightSql`] implements arrow-flight's `FlightSqlService`; each command family lives
//! in its own file and this impl only dispatches:
//!
//! - [`statement`]: `CommandStatementQuery` → GetFlightInfo (plan) → DoGet (stream); a write
//!   sent this way runs once in GetFlightInfo and DoGet returns its count
//! - [`prepared`]: create / bind (DoPut) / execute / update (DoPut) / close with stateless
//!   handles
//! - `CommandStatementUpdate` (DoPut): a write, run once, answering the row count
//! - [`ingest`]: `CommandStatementIngest` (DoPut, ADBC's `adbc_ingest`): the uploaded stream
//!   appended to an Iceberg table (created, appended to or replaced), one snapshot
//! - [`metadata`]: catalogs, schemas, tables, table types, primary and foreign keys
//! - [`sql_info`], [`xdbc`]: GetSqlInfo and GetXdbcTypeInfo tables
//! - [`poll`]: PollFlightInfo runs a statement query in the background and reports progress
//! - [`cancel`]: CancelFlightInfo / CancelQuery answers per the Flight spec
//!
//! arrow-flight's blanket `FlightService` impl leaves out GetSchema, PollFlightInfo,
//! CancelFlightInfo and the session-option actions, and has no auth hook: [`service`] wraps
//! it in [`service::PetrelService`], the type actually served.

pub mod cancel;
pub mod ingest;
pub mod metadata;
pub mod poll;
pub mod prepared;
pub mod service;
pub mod sql_info;
pub mod statement;
pub mod xdbc;

use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow_flight::sql::metadata::{SqlInfoData, XdbcTypeInfoData};
use arrow_flight::sql::server::{FlightSqlService, PeekableFlightDataStream};
use arrow_flight::sql::{
    ActionCancelQueryRequest, ActionCancelQueryResult, ActionClosePreparedStatementRequest,
    ActionCreatePreparedStatementRequest, ActionCreatePreparedStatementResult, CommandGetCatalogs,
    CommandGetCrossReference, CommandGetDbSchemas, CommandGetExportedKeys, CommandGetImportedKeys,
    CommandGetPrimaryKeys, CommandGetSqlInfo, CommandGetTableTypes, CommandGetTables,
    CommandGetXdbcTypeInfo, CommandPreparedStatementQuery, CommandPreparedStatementUpdate,
    CommandStatementIngest, CommandStatementQuery, CommandStatementUpdate,
    DoPutPreparedStatementResult, ProstMessageExt, SqlInfo, TicketStatementQuery,
};
use arrow_flight::{Action, ActionType, FlightDescriptor, FlightInfo, Ticket};
use prost::Message;
use tonic::{Request, Response, Status};

use crate::auth::Identity;
use crate::error::to_status;
use crate::executor::QueryExecutor;
use crate::session::SessionStore;
use crate::telemetry::query_failed;
use crate::tickets::{TicketSigner, Tickets, WRITE_RESULT_TYPE_URL};
use bytes::Bytes;
use statement::{DoGetStream, Logged, SchemaOnly, flight_info, one_batch, write_count_batch};

/// Action names beyond the Flight SQL trait that [`service::PetrelService`] answers.
pub(crate) const CUSTOM_ACTIONS: &[(&str, &str)] = &[
    (
        "CancelFlightInfo",
        "Cancel a running query. Request: CancelFlightInfoRequest; result: CancelFlightInfoResult",
    ),
    (
        "SetSessionOptions",
        "Set session options (catalog, schema). Request: SetSessionOptionsRequest",
    ),
    (
        "GetSessionOptions",
        "Get session options. Request: GetSessionOptionsRequest",
    ),
    (
        "CloseSession",
        "Close the session. Request: CloseSessionRequest",
    ),
];

/// Petrel's Flight SQL command handlers.
pub struct PetrelFlightSql {
    engine: Arc<dyn QueryExecutor>,
    sessions: Arc<SessionStore>,
    /// GetSqlInfo's table (built once; its builder cannot fail on the static values, but an
    /// error would be answered, not panicked on).
    sql_info: Result<SqlInfoData, Status>,
    xdbc: Result<XdbcTypeInfoData, Status>,
    bound: prepared::BoundParameters,
    tickets: Arc<TicketSigner>,
    /// Queries started by PollFlightInfo.
    polls: poll::Polls,
}

impl std::fmt::Debug for PetrelFlightSql {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PetrelFlightSql")
            .field("engine", &self.engine)
            .finish_non_exhaustive()
    }
}

impl PetrelFlightSql {
    /// Handlers over `engine`, with sessions from `sessions`, sealing tickets and handles with
    /// `tickets`.
    pub fn new(
        engine: Arc<dyn QueryExecutor>,
        sessions: Arc<SessionStore>,
        tickets: Arc<TicketSigner>,
    ) -> Self {
        let read_only = engine.options().read_only;
        Self {
            engine,
            sessions,
            sql_info: sql_info::try_sql_info_data(read_only),
            xdbc: xdbc::try_xdbc_type_info_data(),
            bound: prepared::BoundParameters::default(),
            tickets,
            polls: poll::Polls::default(),
        }
    }

    /// The signer of tickets and handles.
    pub fn ticket_signer(&self) -> &TicketSigner {
        &self.tickets
    }

    /// The engine.
    pub fn engine(&self) -> &Arc<dyn QueryExecutor> {
        &self.engine
    }

    /// The queries started by PollFlightInfo.
    pub fn polls(&self) -> &poll::Polls {
        &self.polls
    }

    /// The session store.
    pub fn sessions(&self) -> &Arc<SessionStore> {
        &self.sessions
    }

    /// A FlightInfo whose ticket is the command itself (metadata commands are cheap and
    /// deterministic, so DoGet recomputes them).
    fn command_info(
        &self,
        command: impl ProstMessageExt,
        schema: &arrow::datatypes::Schema,
        descriptor: FlightDescriptor,
    ) -> Result<Response<FlightInfo>, Status> {
        let ticket = Ticket {
            ticket: command.as_any().encode_to_vec().into(),
        };
        Ok(Response::new(flight_info(schema, ticket, descriptor)?))
    }

    fn batch(result: Result<RecordBatch, Status>) -> Result<Response<DoGetStream>, Status> {
        Ok(Response::new(one_batch(result?)))
    }

    fn default_names(&self) -> (String, String) {
        let d = self.sessions.server_defaults();
        (d.catalog.clone(), d.schema.clone())
    }
}

/// Who made a call, for the query log: the user [`service::PetrelService`] authenticated, or
/// `anonymous` (authentication off, or a call that did not pass through it).
pub(crate) fn caller<T>(request: &Request<T>) -> String {
    match request.extensions().get::<Identity>() {
        Some(Identity::User(name)) => name.clone(),
        _ => "anonymous".to_string(),
    }
}

/// Who made a call, as [`service::PetrelService`] authenticated it: tickets are bound to it.
pub(crate) fn identity<T>(request: &Request<T>) -> Identity {
    request
        .extensions()
        .get::<Identity>()
        .cloned()
        .unwrap_or(Identity::Anonymous)
}

/// The SQL of a prepared-statement handle (for the log of a failure; empty if invalid).
fn handle_sql(tickets: Tickets<'_>, handle: &[u8]) -> String {
    tickets
        .open_handle(handle)
        .map(|h| h.sql)
        .unwrap_or_default()
}

#[tonic::async_trait]
impl FlightSqlService for PetrelFlightSql {
    type FlightService = PetrelFlightSql;

    // ---- statements ------------------------------------------------------------------------

    async fn get_flight_info_statement(
        &self,
        query: CommandStatementQuery,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        if query.transaction_id.is_some() {
            return Err(Status::invalid_argument("transactions are not supported"));
        }
        let session = self.sessions.current(&request);
        let user = caller(&request);
        let who = identity(&request);
        let schema_only = request.extensions().get::<SchemaOnly>().is_some();
        let (info, _) = statement::plan_statement(
            self.engine.as_ref(),
            Tickets::new(&self.tickets, &who),
            &query.query,
            session,
            &user,
            request.into_inner(),
            schema_only,
        )
        .await?;
        Ok(Response::new(info))
    }

    async fn do_get_statement(
        &self,
        ticket: TicketStatementQuery,
        request: Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        let who = identity(&request);
        let t = Tickets::new(&self.tickets, &who).open_statement(&ticket.statement_handle)?;
        if let Some(result) = self.polls.take_result(&t) {
            // The result of a polled query, computed already.
            return Ok(Response::new(result));
        }
        Ok(Response::new(
            statement::execute_ticket(self.engine.as_ref(), t, &caller(&request)).await?,
        ))
    }

    async fn do_get_fallback(
        &self,
        request: Request<Ticket>,
        message: arrow_flight::sql::Any,
    ) -> Result<Response<DoGetStream>, Status> {
        if message.type_url == WRITE_RESULT_TYPE_URL {
            // A write that already ran: its count, as often as asked; nothing runs again.
            let who = identity(&request);
            let t = Tickets::new(&self.tickets, &who).open_write_result(&message.value)?;
            return Self::batch(write_count_batch(t.count));
        }
        Err(Status::invalid_argument(format!(
            "unknown ticket type {:?}: tickets come from GetFlightInfo",
            message.type_url
        )))
    }

    async fn do_put_statement_update(
        &self,
        ticket: CommandStatementUpdate,
        request: Request<PeekableFlightDataStream>,
    ) -> Result<i64, Status> {
        let user = caller(&request);
        let query_id = Bytes::from(crate::auth::random_bytes(16));
        if ticket.transaction_id.is_some() {
            let status = Status::invalid_argument(
                "transactions are not supported (each statement commits on its own)",
            );
            query_failed(Some(&query_id), &user, &ticket.query, &status);
            return Err(status);
        }
        let session = self.sessions.current(&request);
        let slot = self
            .engine
            .admission()
            .admit("statement update (DoPut)")
            .await
            .inspect_err(|s| query_failed(Some(&query_id), &user, &ticket.query, s))?;
        let frame = self
            .engine
            .plan_write(&ticket.query, &session, &[])
            .await
            .inspect_err(|s| query_failed(Some(&query_id), &user, &ticket.query, s))?;
        // (The write runs under a slot of its own.)
        drop(slot);
        let n = self
            .engine
            .run_write(frame, &query_id, &user, &ticket.query)
            .await?;
        i64::try_from(n).map_err(|_| Status::internal("row count exceeds i64"))
    }

    async fn do_put_statement_ingest(
        &self,
        ticket: CommandStatementIngest,
        request: Request<PeekableFlightDataStream>,
    ) -> Result<i64, Status> {
        let user = caller(&request);
        let session = self.sessions.current(&request);
        ingest::ingest(
            self.engine.as_ref(),
            ticket,
            session,
            request.into_inner(),
            &user,
        )
        .await
    }

    // ---- prepared statements ---------------------------------------------------------------

    async fn do_action_create_prepared_statement(
        &self,
        query: ActionCreatePreparedStatementRequest,
        request: Request<Action>,
    ) -> Result<ActionCreatePreparedStatementResult, Status> {
        let session = self.sessions.current(&request);
        let (user, sql) = (caller(&request), query.query.clone());
        let who = identity(&request);
        prepared::create(
            self.engine.as_ref(),
            Tickets::new(&self.tickets, &who),
            query,
            session,
        )
        .await
        .inspect_err(|s| query_failed(None, &user, &sql, s))
    }

    async fn do_action_close_prepared_statement(
        &self,
        _query: ActionClosePreparedStatementRequest,
        _request: Request<Action>,
    ) -> Result<(), Status> {
        // Handles are stateless: nothing to free.
        Ok(())
    }

    async fn do_put_prepared_statement_query(
        &self,
        query: CommandPreparedStatementQuery,
        request: Request<PeekableFlightDataStream>,
    ) -> Result<DoPutPreparedStatementResult, Status> {
        let who = identity(&request);
        let tickets = Tickets::new(&self.tickets, &who);
        let (user, sql) = (
            caller(&request),
            handle_sql(tickets, &query.prepared_statement_handle),
        );
        prepared::bind(
            self.engine.as_ref(),
            tickets,
            &self.bound,
            query,
            request.into_inner(),
        )
        .await
        .inspect_err(|s| query_failed(None, &user, &sql, s))
    }

    async fn get_flight_info_prepared_statement(
        &self,
        cmd: CommandPreparedStatementQuery,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let who = identity(&request);
        let tickets = Tickets::new(&self.tickets, &who);
        let (user, sql) = (
            caller(&request),
            handle_sql(tickets, &cmd.prepared_statement_handle),
        );
        let schema_only = request.extensions().get::<SchemaOnly>().is_some();
        let info = prepared::flight_info_for(
            self.engine.as_ref(),
            tickets,
            &self.bound,
            cmd,
            request.into_inner(),
            &user,
            schema_only,
        )
        .await
        .map_err(|s| {
            if !Logged::was(&s) {
                query_failed(None, &user, &sql, &s);
            }
            Logged::strip(s)
        })?;
        Ok(Response::new(info))
    }

    async fn do_get_prepared_statement(
        &self,
        query: CommandPreparedStatementQuery,
        request: Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        let who = identity(&request);
        Ok(Response::new(
            prepared::execute(
                self.engine.as_ref(),
                Tickets::new(&self.tickets, &who),
                query,
                &caller(&request),
            )
            .await?,
        ))
    }

    async fn do_put_prepared_statement_update(
        &self,
        query: CommandPreparedStatementUpdate,
        request: Request<PeekableFlightDataStream>,
    ) -> Result<i64, Status> {
        let user = caller(&request);
        let who = identity(&request);
        prepared::update(
            self.engine.as_ref(),
            Tickets::new(&self.tickets, &who),
            &self.bound,
            query,
            request.into_inner(),
            &user,
        )
        .await
    }

    // ---- metadata --------------------------------------------------------------------------

    async fn get_flight_info_catalogs(
        &self,
        query: CommandGetCatalogs,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let schema = query.into_builder().schema();
        self.command_info(query, &schema, request.into_inner())
    }

    async fn do_get_catalogs(
        &self,
        _query: CommandGetCatalogs,
        _request: Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        Self::batch(metadata::catalogs(self.engine.as_ref()))
    }

    async fn get_flight_info_schemas(
        &self,
        query: CommandGetDbSchemas,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let schema = query.clone().into_builder().schema();
        self.command_info(query, &schema, request.into_inner())
    }

    async fn do_get_schemas(
        &self,
        query: CommandGetDbSchemas,
        _request: Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        let _slot = self.engine.admission().admit("GetDbSchemas").await?;
        Self::batch(metadata::db_schemas(self.engine.as_ref(), query).await)
    }

    async fn get_flight_info_tables(
        &self,
        query: CommandGetTables,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let schema = query.clone().into_builder().schema();
        self.command_info(query, &schema, request.into_inner())
    }

    async fn do_get_tables(
        &self,
        query: CommandGetTables,
        _request: Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        let _slot = self.engine.admission().admit("GetTables").await?;
        Self::batch(metadata::tables(self.engine.as_ref(), query).await)
    }

    async fn get_flight_info_table_types(
        &self,
        query: CommandGetTableTypes,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let schema = query.into_builder().schema();
        self.command_info(query, &schema, request.into_inner())
    }

    async fn do_get_table_types(
        &self,
        query: CommandGetTableTypes,
        _request: Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        let mut b = query.into_builder();
        for t in metadata::TABLE_TYPES {
            b.append(t);
        }
        Self::batch(b.build().map_err(|e| to_status(&e)))
    }

    async fn get_flight_info_sql_info(
        &self,
        query: CommandGetSqlInfo,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let schema = query
            .clone()
            .into_builder(self.sql_info.as_ref().map_err(Clone::clone)?)
            .schema();
        self.command_info(query, &schema, request.into_inner())
    }

    async fn do_get_sql_info(
        &self,
        query: CommandGetSqlInfo,
        _request: Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        Self::batch(
            query
                .into_builder(self.sql_info.as_ref().map_err(Clone::clone)?)
                .build()
                .map_err(|e| to_status(&e)),
        )
    }

    async fn get_flight_info_xdbc_type_info(
        &self,
        query: CommandGetXdbcTypeInfo,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        let schema = query
            .into_builder(self.xdbc.as_ref().map_err(Clone::clone)?)
            .schema();
        self.command_info(query, &schema, request.into_inner())
    }

    async fn do_get_xdbc_type_info(
        &self,
        query: CommandGetXdbcTypeInfo,
        _request: Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        Self::batch(
            query
                .into_builder(self.xdbc.as_ref().map_err(Clone::clone)?)
                .build()
                .map_err(|e| to_status(&e)),
        )
    }

    async fn get_flight_info_primary_keys(
        &self,
        query: CommandGetPrimaryKeys,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        self.command_info(query, &metadata::PRIMARY_KEYS_SCHEMA, request.into_inner())
    }

    async fn do_get_primary_keys(
        &self,
        query: CommandGetPrimaryKeys,
        _request: Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        let (dc, ds) = self.default_names();
        let _slot = self.engine.admission().admit("GetPrimaryKeys").await?;
        Self::batch(
            metadata::primary_keys(
                self.engine.as_ref(),
                query.catalog,
                query.db_schema,
                query.table,
                &dc,
                &ds,
            )
            .await,
        )
    }

    async fn get_flight_info_exported_keys(
        &self,
        query: CommandGetExportedKeys,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        self.command_info(query, &metadata::FOREIGN_KEYS_SCHEMA, request.into_inner())
    }

    async fn do_get_exported_keys(
        &self,
        _query: CommandGetExportedKeys,
        _request: Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        Self::batch(Ok(metadata::no_foreign_keys()))
    }

    async fn get_flight_info_imported_keys(
        &self,
        query: CommandGetImportedKeys,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        self.command_info(query, &metadata::FOREIGN_KEYS_SCHEMA, request.into_inner())
    }

    async fn do_get_imported_keys(
        &self,
        _query: CommandGetImportedKeys,
        _request: Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        Self::batch(Ok(metadata::no_foreign_keys()))
    }

    async fn get_flight_info_cross_reference(
        &self,
        query: CommandGetCrossReference,
        request: Request<FlightDescriptor>,
    ) -> Result<Response<FlightInfo>, Status> {
        self.command_info(query, &metadata::FOREIGN_KEYS_SCHEMA, request.into_inner())
    }

    async fn do_get_cross_reference(
        &self,
        _query: CommandGetCrossReference,
        _request: Request<Ticket>,
    ) -> Result<Response<DoGetStream>, Status> {
        Self::batch(Ok(metadata::no_foreign_keys()))
    }

    // ---- actions ---------------------------------------------------------------------------

    async fn do_action_cancel_query(
        &self,
        query: ActionCancelQueryRequest,
        request: Request<Action>,
    ) -> Result<ActionCancelQueryResult, Status> {
        let info = FlightInfo::decode(query.info)
            .map_err(|e| Status::invalid_argument(format!("malformed FlightInfo: {e}")))?;
        let who = identity(&request);
        let status = cancel::cancel_info(
            self.engine.as_ref(),
            Tickets::new(&self.tickets, &who),
            &info,
        )?;
        Ok(ActionCancelQueryResult {
            result: status as i32,
        })
    }

    async fn list_custom_actions(&self) -> Option<Vec<Result<ActionType, Status>>> {
        Some(
            CUSTOM_ACTIONS
                .iter()
                .map(|(t, d)| {
                    Ok(ActionType {
                        r#type: t.to_string(),
                        description: d.to_string(),
                    })
                })
                .collect(),
        )
    }

    async fn register_sql_info(&self, _id: i32, _result: &SqlInfo) {}
}
