--
-- PostgreSQL database dump
--


-- Dumped from database version 15.18 (Debian 15.18-0+deb12u1)
-- Dumped by pg_dump version 15.18 (Debian 15.18-0+deb12u1)

SET statement_timeout = 0;
SET lock_timeout = 0;
SET idle_in_transaction_session_timeout = 0;
SET client_encoding = 'UTF8';
SET standard_conforming_strings = on;
SELECT pg_catalog.set_config('search_path', '', false);
SET check_function_bodies = false;
SET xmloption = content;
SET client_min_messages = warning;
SET row_security = off;

SET default_tablespace = '';

SET default_table_access_method = heap;

--
-- Name: approvals; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.approvals (
    id text NOT NULL,
    created_at double precision NOT NULL,
    expires_at double precision NOT NULL,
    session text NOT NULL,
    tool text NOT NULL,
    args text NOT NULL,
    effects text NOT NULL,
    hosts text NOT NULL,
    reason text NOT NULL,
    status text NOT NULL,
    answered_at double precision,
    answered_by text,
    session_kind text DEFAULT 'main'::text NOT NULL,
    scope text,
    detail text DEFAULT '{}'::text NOT NULL,
    waiter text,
    binding text,
    consumed_at double precision,
    run_id text,
    tainted_by text,
    caller text,
    gone_recorded integer DEFAULT 0 NOT NULL
);


--
-- Name: audit; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.audit (
    id bigint NOT NULL,
    ts double precision NOT NULL,
    session text NOT NULL,
    caller text NOT NULL,
    tool text NOT NULL,
    kind text NOT NULL,
    decision text NOT NULL,
    reason text NOT NULL,
    grant_id text,
    outcome text NOT NULL,
    error_code text,
    error text,
    args text NOT NULL,
    effects text NOT NULL,
    duration_ms double precision NOT NULL,
    usage text NOT NULL,
    idempotency_key text,
    cached integer NOT NULL,
    approval_id text,
    run_id text,
    prev_hash text NOT NULL,
    hash text NOT NULL
);


--
-- Name: audit_chain; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.audit_chain (
    one integer NOT NULL,
    keyed_from bigint,
    key_id text,
    plain_head text,
    mac text,
    head_keyed integer DEFAULT 0 NOT NULL,
    chain_id text,
    CONSTRAINT audit_chain_one_check CHECK ((one = 1))
);


--
-- Name: audit_head; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.audit_head (
    one integer NOT NULL,
    last_id bigint NOT NULL,
    last_hash text NOT NULL,
    mac text,
    CONSTRAINT audit_head_one_check CHECK ((one = 1))
);


--
-- Name: grants; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.grants (
    id text NOT NULL,
    created_at double precision NOT NULL,
    body text NOT NULL
);


--
-- Name: grants_version; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.grants_version (
    one integer NOT NULL,
    version bigint NOT NULL,
    CONSTRAINT grants_version_one_check CHECK ((one = 1))
);


--
-- Name: home_files; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.home_files (
    path text NOT NULL,
    kind text NOT NULL,
    data bytea NOT NULL,
    sha256 text NOT NULL,
    mode integer NOT NULL,
    version bigint NOT NULL,
    written_by text NOT NULL,
    written_at double precision NOT NULL,
    CONSTRAINT home_files_kind_check CHECK ((kind = ANY (ARRAY['file'::text, 'link'::text, 'gone'::text])))
);


--
-- Name: home_files_version; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.home_files_version (
    one integer NOT NULL,
    version bigint NOT NULL,
    CONSTRAINT home_files_version_one_check CHECK ((one = 1))
);


--
-- Name: idempotency; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.idempotency (
    session text NOT NULL,
    tool text NOT NULL,
    key text NOT NULL,
    args_hash text NOT NULL,
    result text,
    expires_at double precision NOT NULL,
    claimed_by text,
    claim_until double precision
);


--
-- Name: pincer_instances; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.pincer_instances (
    id text NOT NULL,
    tag text NOT NULL,
    host text NOT NULL,
    pid integer NOT NULL,
    started_at double precision NOT NULL,
    heartbeat_at double precision NOT NULL,
    stopped_at double precision
);


--
-- Name: pincer_schema; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.pincer_schema (
    version integer NOT NULL,
    applied_at timestamp with time zone DEFAULT now() NOT NULL
);


--
-- Name: run_messages; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.run_messages (
    run_id text NOT NULL,
    seq integer NOT NULL,
    ts double precision NOT NULL,
    role text NOT NULL,
    body text NOT NULL,
    audit_id bigint
);


--
-- Name: runs; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.runs (
    id text NOT NULL,
    created_at double precision NOT NULL,
    updated_at double precision NOT NULL,
    ended_at double precision,
    skill text,
    params text NOT NULL,
    message text,
    trigger text NOT NULL,
    session text NOT NULL,
    provider text NOT NULL,
    model text NOT NULL,
    status text NOT NULL,
    stop text,
    error text,
    usage text NOT NULL,
    cost_usd double precision,
    owner text,
    cancel_requested integer DEFAULT 0 NOT NULL
);


--
-- Name: trigger_deliveries; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.trigger_deliveries (
    hook text NOT NULL,
    delivery_id text NOT NULL,
    received_at double precision NOT NULL,
    event text,
    status integer NOT NULL,
    response text NOT NULL
);


--
-- Name: trigger_firings; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.trigger_firings (
    id text NOT NULL,
    ts double precision NOT NULL,
    kind text NOT NULL,
    name text NOT NULL,
    fired_by text NOT NULL,
    skill text,
    session text NOT NULL,
    params text NOT NULL,
    payload text,
    run_id text NOT NULL,
    status text NOT NULL,
    error text,
    request text,
    owner text,
    audit_id bigint,
    job text,
    attempt integer DEFAULT 0 NOT NULL,
    ended_at double precision
);


--
-- Name: trigger_jobs; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.trigger_jobs (
    name text NOT NULL,
    source text NOT NULL,
    spec text NOT NULL,
    spec_hash text NOT NULL,
    paused integer DEFAULT 0 NOT NULL,
    next_run double precision,
    retry_at double precision,
    attempt integer DEFAULT 0 NOT NULL,
    last_run double precision,
    last_status text,
    last_error text,
    last_run_id text,
    run_requested double precision,
    created_at double precision NOT NULL,
    updated_at double precision NOT NULL
);


--
-- Name: trigger_lease; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.trigger_lease (
    one integer NOT NULL,
    owner text NOT NULL,
    heartbeat double precision NOT NULL,
    CONSTRAINT trigger_lease_one_check CHECK ((one = 1))
);


--
-- Name: ui_sign_ins; Type: TABLE; Schema: public; Owner: -
--

CREATE TABLE public.ui_sign_ins (
    key text NOT NULL,
    token_digest text NOT NULL,
    csrf text NOT NULL,
    created_at double precision NOT NULL,
    last_used double precision NOT NULL
);


--
-- Data for Name: approvals; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.approvals VALUES ('387e95abeca2b7431eba2ffeb55d5d0f', 1796602273.8521473, 1796605873.8521473, 'main', 'http', '{"url": "https://example.org"}', '["network"]', '["example.org"]', 'asks', 'pending', NULL, NULL, 'main', NULL, '{}', 'vm/9479:926028', NULL, NULL, NULL, NULL, NULL, 0);
INSERT INTO public.approvals VALUES ('6087928ffe5faa5d5327c708c08bebc1', 1796602273.8572562, 1796605873.8572562, 'main', 'write_file', '{"path": "a"}', '["write_filesystem"]', '[]', 'asks', 'allow_once', 1796602273.8580043, 'fixture', 'main', NULL, '{}', 'vm/9479:926028', NULL, NULL, NULL, NULL, NULL, 0);


--
-- Data for Name: audit; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.audit VALUES (1, 1796602273.8270729, 'main', 'fixture-0', 'echo', 'call', 'allow', 'echo declares no effects', NULL, 'ok', NULL, NULL, '{"text":"call 0"}', '[]', 1.424, '{"duration_ms":1.424,"output_bytes":17,"redactions":0,"truncated":false}', NULL, 0, NULL, NULL, '0000000000000000000000000000000000000000000000000000000000000000', '59222fb6f7fe2d90a9c2c8b2b86fea3c109f640a714664c5c029365fb4184d64');
INSERT INTO public.audit VALUES (2, 1796602273.841693, 'main', 'fixture-1', 'echo', 'call', 'allow', 'echo declares no effects', NULL, 'ok', NULL, NULL, '{"text":"call 1"}', '[]', 0.3, '{"duration_ms":0.3,"output_bytes":17,"redactions":0,"truncated":false}', NULL, 0, NULL, NULL, '59222fb6f7fe2d90a9c2c8b2b86fea3c109f640a714664c5c029365fb4184d64', '44992e8278812a330381481103845a4d12ac721bf1a16a4eb6ef53a65888749d');
INSERT INTO public.audit VALUES (3, 1796602273.8432128, 'main', 'fixture-2', 'echo', 'call', 'allow', 'echo declares no effects', NULL, 'ok', NULL, NULL, '{"text":"call 2"}', '[]', 0.193, '{"duration_ms":0.193,"output_bytes":17,"redactions":0,"truncated":false}', NULL, 0, NULL, NULL, '44992e8278812a330381481103845a4d12ac721bf1a16a4eb6ef53a65888749d', '451da77e13e9dda3670bc0d14415193c71f4fca2195f072d660a57b448266c12');
INSERT INTO public.audit VALUES (4, 1796602273.846334, 'main', 'fixture-3', 'echo', 'call', 'allow', 'echo declares no effects', NULL, 'ok', NULL, NULL, '{"text":"call 3"}', '[]', 0.151, '{"duration_ms":0.151,"output_bytes":17,"redactions":0,"truncated":false}', NULL, 0, NULL, NULL, '451da77e13e9dda3670bc0d14415193c71f4fca2195f072d660a57b448266c12', '4c975457f55a8b78c4eb8cd9eff018e4ef719e5c7ffddb7c6af67966923fa6f8');
INSERT INTO public.audit VALUES (5, 1796602273.8473837, 'main', 'fixture-4', 'echo', 'call', 'allow', 'echo declares no effects', NULL, 'ok', NULL, NULL, '{"text":"call 4"}', '[]', 0.128, '{"duration_ms":0.128,"output_bytes":17,"redactions":0,"truncated":false}', NULL, 0, NULL, NULL, '4c975457f55a8b78c4eb8cd9eff018e4ef719e5c7ffddb7c6af67966923fa6f8', 'c5367779cfe0928deb5936947ecc09d93ced7c8c7ce85a8b67b670230d76b283');
INSERT INTO public.audit VALUES (6, 1796602273.8502367, 'main', 'api', 'echo', 'call', 'allow', 'echo declares no effects', NULL, 'ok', NULL, NULL, '{"text":"once"}', '[]', 0.153, '{"duration_ms":0.153,"output_bytes":15,"redactions":0,"truncated":false}', 'key-1', 0, NULL, NULL, 'c5367779cfe0928deb5936947ecc09d93ced7c8c7ce85a8b67b670230d76b283', '98bfb64a1b8ca2a5471838ff56fa60ef59adb13922b44eff67f244fd0cbfe1ca');


--
-- Data for Name: audit_chain; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.audit_chain VALUES (1, 1, '3f285e33f769cf46', '0000000000000000000000000000000000000000000000000000000000000000', '53234e9b19cf65bb3757f1624b56b99f6676ba42a384d93d2c4a549fe46b5ff3', 1, 'a987b5fdd4e464447c6fe13855e32fe9');


--
-- Data for Name: audit_head; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.audit_head VALUES (1, 6, '98bfb64a1b8ca2a5471838ff56fa60ef59adb13922b44eff67f244fd0cbfe1ca', '570a199fbe4e988948f7612778dca30d06a022ab2f9fe3af672fb6c4b463eac3');


--
-- Data for Name: grants; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.grants VALUES ('grant-1', 1796602273.8513784, '{"id": "grant-1", "tool": "http", "effects": {"network": "allow"}, "default": null, "hosts": null, "expires_at": null, "max_invocations": null, "sessions": null, "source": "approval"}');


--
-- Data for Name: grants_version; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.grants_version VALUES (1, 1);


--
-- Data for Name: home_files; Type: TABLE DATA; Schema: public; Owner: -
--



--
-- Data for Name: home_files_version; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.home_files_version VALUES (1, 0);


--
-- Data for Name: idempotency; Type: TABLE DATA; Schema: public; Owner: -
--



--
-- Data for Name: pincer_instances; Type: TABLE DATA; Schema: public; Owner: -
--



--
-- Data for Name: pincer_schema; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.pincer_schema VALUES (1, '2026-12-07 00:11:13.657163+00');
INSERT INTO public.pincer_schema VALUES (2, '2026-12-07 00:11:13.690105+00');
INSERT INTO public.pincer_schema VALUES (3, '2026-12-07 00:11:13.700646+00');
INSERT INTO public.pincer_schema VALUES (4, '2026-12-07 00:11:13.701167+00');
INSERT INTO public.pincer_schema VALUES (5, '2026-12-07 00:11:13.705371+00');
INSERT INTO public.pincer_schema VALUES (6, '2026-12-07 00:11:13.707022+00');
INSERT INTO public.pincer_schema VALUES (7, '2026-12-07 00:11:13.712736+00');
INSERT INTO public.pincer_schema VALUES (8, '2026-12-07 00:11:13.713217+00');


--
-- Data for Name: run_messages; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.run_messages VALUES ('run-1', 0, 1796602273.8592417, 'user', '{"content":"hello"}', NULL);


--
-- Data for Name: runs; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.runs VALUES ('run-1', 1796602273.8587456, 1796602273.859577, 1796602273.859577, NULL, '{"p":1}', 'hello', 'cli', 'main', 'openai', 'gpt-x', 'done', 'end', NULL, '{"input_tokens":3}', NULL, 'vm/9479:926028', 0);


--
-- Data for Name: trigger_deliveries; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.trigger_deliveries VALUES ('gh', 'd-1', 1700000000, 'push', 202, '{"accepted":true}');


--
-- Data for Name: trigger_firings; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.trigger_firings VALUES ('f-1', 1700000000, 'webhook', 'gh', 'hook', NULL, 'main', '{"a":1}', NULL, 'run-2', 'done', NULL, NULL, NULL, NULL, NULL, 0, NULL);


--
-- Data for Name: trigger_jobs; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.trigger_jobs VALUES ('nightly', 'cli', '{"cron":"0 3 * * *","skill":"x"}', 'h1', 0, 2000000000, NULL, 0, NULL, NULL, NULL, NULL, NULL, 1796602273.8598738, 1796602273.8598738);


--
-- Data for Name: trigger_lease; Type: TABLE DATA; Schema: public; Owner: -
--



--
-- Data for Name: ui_sign_ins; Type: TABLE DATA; Schema: public; Owner: -
--

INSERT INTO public.ui_sign_ins VALUES ('kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk', 'tttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttt', 'cccccccccccccccccccccccccccccccc', 1, 2);


--
-- Name: approvals approvals_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.approvals
    ADD CONSTRAINT approvals_pkey PRIMARY KEY (id);


--
-- Name: audit_chain audit_chain_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.audit_chain
    ADD CONSTRAINT audit_chain_pkey PRIMARY KEY (one);


--
-- Name: audit_head audit_head_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.audit_head
    ADD CONSTRAINT audit_head_pkey PRIMARY KEY (one);


--
-- Name: audit audit_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.audit
    ADD CONSTRAINT audit_pkey PRIMARY KEY (id);


--
-- Name: grants grants_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.grants
    ADD CONSTRAINT grants_pkey PRIMARY KEY (id);


--
-- Name: grants_version grants_version_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.grants_version
    ADD CONSTRAINT grants_version_pkey PRIMARY KEY (one);


--
-- Name: home_files home_files_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.home_files
    ADD CONSTRAINT home_files_pkey PRIMARY KEY (path);


--
-- Name: home_files_version home_files_version_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.home_files_version
    ADD CONSTRAINT home_files_version_pkey PRIMARY KEY (one);


--
-- Name: idempotency idempotency_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.idempotency
    ADD CONSTRAINT idempotency_pkey PRIMARY KEY (session, tool, key);


--
-- Name: pincer_instances pincer_instances_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.pincer_instances
    ADD CONSTRAINT pincer_instances_pkey PRIMARY KEY (id);


--
-- Name: pincer_schema pincer_schema_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.pincer_schema
    ADD CONSTRAINT pincer_schema_pkey PRIMARY KEY (version);


--
-- Name: run_messages run_messages_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.run_messages
    ADD CONSTRAINT run_messages_pkey PRIMARY KEY (run_id, seq);


--
-- Name: runs runs_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.runs
    ADD CONSTRAINT runs_pkey PRIMARY KEY (id);


--
-- Name: trigger_deliveries trigger_deliveries_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.trigger_deliveries
    ADD CONSTRAINT trigger_deliveries_pkey PRIMARY KEY (hook, delivery_id);


--
-- Name: trigger_firings trigger_firings_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.trigger_firings
    ADD CONSTRAINT trigger_firings_pkey PRIMARY KEY (id);


--
-- Name: trigger_jobs trigger_jobs_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.trigger_jobs
    ADD CONSTRAINT trigger_jobs_pkey PRIMARY KEY (name);


--
-- Name: trigger_lease trigger_lease_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.trigger_lease
    ADD CONSTRAINT trigger_lease_pkey PRIMARY KEY (one);


--
-- Name: ui_sign_ins ui_sign_ins_pkey; Type: CONSTRAINT; Schema: public; Owner: -
--

ALTER TABLE ONLY public.ui_sign_ins
    ADD CONSTRAINT ui_sign_ins_pkey PRIMARY KEY (key);


--
-- Name: approvals_binding; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX approvals_binding ON public.approvals USING btree (binding);


--
-- Name: approvals_status; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX approvals_status ON public.approvals USING btree (status);


--
-- Name: audit_grant; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX audit_grant ON public.audit USING btree (grant_id) WHERE (grant_id IS NOT NULL);


--
-- Name: audit_tool_ts; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX audit_tool_ts ON public.audit USING btree (tool, ts);


--
-- Name: home_files_by_version; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX home_files_by_version ON public.home_files USING btree (version);


--
-- Name: idempotency_expiry; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX idempotency_expiry ON public.idempotency USING btree (expires_at);


--
-- Name: pincer_instances_tag; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX pincer_instances_tag ON public.pincer_instances USING btree (tag);


--
-- Name: runs_created; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX runs_created ON public.runs USING btree (created_at);


--
-- Name: trigger_deliveries_received; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX trigger_deliveries_received ON public.trigger_deliveries USING btree (received_at);


--
-- Name: trigger_firings_by_name; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX trigger_firings_by_name ON public.trigger_firings USING btree (kind, name, ts);


--
-- Name: trigger_firings_open; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX trigger_firings_open ON public.trigger_firings USING btree (status, ts) WHERE (status = ANY (ARRAY['queued'::text, 'starting'::text, 'started'::text]));


--
-- Name: ui_sign_ins_used; Type: INDEX; Schema: public; Owner: -
--

CREATE INDEX ui_sign_ins_used ON public.ui_sign_ins USING btree (last_used);


--
-- PostgreSQL database dump complete
--


