PRAGMA user_version = 9;
BEGIN TRANSACTION;
CREATE TABLE approvals (
    id TEXT PRIMARY KEY,
    created_at REAL NOT NULL,
    expires_at REAL NOT NULL,
    session TEXT NOT NULL,
    tool TEXT NOT NULL,
    args TEXT NOT NULL,
    effects TEXT NOT NULL,
    hosts TEXT NOT NULL,
    reason TEXT NOT NULL,
    status TEXT NOT NULL,
    answered_at REAL,
    answered_by TEXT
, session_kind TEXT NOT NULL DEFAULT 'main', scope TEXT, detail TEXT NOT NULL DEFAULT '{}', waiter TEXT, binding TEXT, consumed_at REAL, run_id TEXT, tainted_by TEXT, caller TEXT, gone_recorded INTEGER NOT NULL DEFAULT 0);
INSERT INTO "approvals" VALUES('6ceac9eb2f635785bc7702cd7480b146',1.79660227034744834897e+09,1.79660587034744834902e+09,'main','http','{"url": "https://example.org"}','["network"]','["example.org"]','asks','pending',NULL,NULL,'main',NULL,'{}','vm/9479:926028',NULL,NULL,NULL,NULL,NULL,0);
INSERT INTO "approvals" VALUES('7b645570033b2faf0416902669cff1c5',1.79660227034753274921e+09,1.79660587034753274921e+09,'main','write_file','{"path": "a"}','["write_filesystem"]','[]','asks','allow_once',1.79660227034772181512e+09,'fixture','main',NULL,'{}','vm/9479:926028',NULL,NULL,NULL,NULL,NULL,0);
CREATE TABLE audit (
    id INTEGER PRIMARY KEY,
    ts REAL NOT NULL,
    session TEXT NOT NULL,
    caller TEXT NOT NULL,
    tool TEXT NOT NULL,
    kind TEXT NOT NULL,
    decision TEXT NOT NULL,
    reason TEXT NOT NULL,
    grant_id TEXT,
    outcome TEXT NOT NULL,
    error_code TEXT,
    error TEXT,
    args TEXT NOT NULL,
    effects TEXT NOT NULL,
    duration_ms REAL NOT NULL,
    usage TEXT NOT NULL,
    idempotency_key TEXT,
    cached INTEGER NOT NULL,
    approval_id TEXT,
    prev_hash TEXT NOT NULL,
    hash TEXT NOT NULL
, run_id TEXT);
INSERT INTO "audit" VALUES(1,1.79660227034637045859e+09,'main','fixture-0','echo','call','allow','echo declares no effects',NULL,'ok',NULL,NULL,'{"text":"call 0"}','[]',1.512,'{"duration_ms":1.512,"output_bytes":17,"redactions":0,"truncated":false}',NULL,0,NULL,'0000000000000000000000000000000000000000000000000000000000000000','0711851f81feabd99f8ff5a70c628d74ce48255040880ecae6ee94fc0236f72f',NULL);
INSERT INTO "audit" VALUES(2,1.79660227034680843351e+09,'main','fixture-1','echo','call','allow','echo declares no effects',NULL,'ok',NULL,NULL,'{"text":"call 1"}','[]',0.13,'{"duration_ms":0.13,"output_bytes":17,"redactions":0,"truncated":false}',NULL,0,NULL,'0711851f81feabd99f8ff5a70c628d74ce48255040880ecae6ee94fc0236f72f','38af865f7717d5841b38df60e63a01a1d769b4bbfbf6403fcce8364b24adc92d',NULL);
INSERT INTO "audit" VALUES(3,1.79660227034695649142e+09,'main','fixture-2','echo','call','allow','echo declares no effects',NULL,'ok',NULL,NULL,'{"text":"call 2"}','[]',0.068,'{"duration_ms":0.068,"output_bytes":17,"redactions":0,"truncated":false}',NULL,0,NULL,'38af865f7717d5841b38df60e63a01a1d769b4bbfbf6403fcce8364b24adc92d','fb6cb70d9bfb786fe48ef0360d09a035af02dbdacb84287b6df7894ae42d6c2d',NULL);
INSERT INTO "audit" VALUES(4,1.79660227034708809851e+09,'main','fixture-3','echo','call','allow','echo declares no effects',NULL,'ok',NULL,NULL,'{"text":"call 3"}','[]',0.064,'{"duration_ms":0.064,"output_bytes":17,"redactions":0,"truncated":false}',NULL,0,NULL,'fb6cb70d9bfb786fe48ef0360d09a035af02dbdacb84287b6df7894ae42d6c2d','841a5213730e8b26ad96e2307ff4a597ea94e34af87c425ede42627d458601b9',NULL);
INSERT INTO "audit" VALUES(5,1.79660227034720253939e+09,'main','fixture-4','echo','call','allow','echo declares no effects',NULL,'ok',NULL,NULL,'{"text":"call 4"}','[]',0.053,'{"duration_ms":0.053,"output_bytes":17,"redactions":0,"truncated":false}',NULL,0,NULL,'841a5213730e8b26ad96e2307ff4a597ea94e34af87c425ede42627d458601b9','4260b941181a099533dbdb69b6607d9389d6d8ea44b0924cc9658837d9a84834',NULL);
INSERT INTO "audit" VALUES(6,1.79660227034731626513e+09,'main','api','echo','call','allow','echo declares no effects',NULL,'ok',NULL,NULL,'{"text":"once"}','[]',0.054,'{"duration_ms":0.054,"output_bytes":15,"redactions":0,"truncated":false}','key-1',0,NULL,'4260b941181a099533dbdb69b6607d9389d6d8ea44b0924cc9658837d9a84834','e3e287ba76881003ea143ec0a1f4161299852ed727146789074665d3455672c5',NULL);
CREATE TABLE audit_chain (
    one INTEGER PRIMARY KEY CHECK (one = 1),
    keyed_from INTEGER,
    key_id TEXT,
    plain_head TEXT,
    mac TEXT
, head_keyed INTEGER NOT NULL DEFAULT 0, chain_id TEXT);
INSERT INTO "audit_chain" VALUES(1,1,'3f285e33f769cf46','0000000000000000000000000000000000000000000000000000000000000000','43548119f526df4b26aceb7ea6c5f45298be1b1f6aef6f1e0ce6df00a71989bd',1,'a1499237b6ab43821acddc78f12a4f14');
CREATE TABLE audit_head (
    one INTEGER PRIMARY KEY CHECK (one = 1),
    last_id INTEGER NOT NULL,
    last_hash TEXT NOT NULL
, mac TEXT);
INSERT INTO "audit_head" VALUES(1,6,'e3e287ba76881003ea143ec0a1f4161299852ed727146789074665d3455672c5','31d5f9363800bd1af8e9067b9d3d1a3e05bed1afc0d6453ed0c28b1873e87fa3');
CREATE TABLE grants (
    id TEXT PRIMARY KEY,
    created_at REAL NOT NULL,
    body TEXT NOT NULL
);
INSERT INTO "grants" VALUES('grant-1',1.79660227034739828112e+09,'{"id": "grant-1", "tool": "http", "effects": {"network": "allow"}, "default": null, "hosts": null, "expires_at": null, "max_invocations": null, "sessions": null, "source": "approval"}');
CREATE TABLE idempotency (
    session TEXT NOT NULL,
    tool TEXT NOT NULL,
    key TEXT NOT NULL,
    args_hash TEXT NOT NULL,
    result TEXT NOT NULL,
    expires_at REAL NOT NULL,
    PRIMARY KEY (session, tool, key)
);
CREATE TABLE run_messages (
    run_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    ts REAL NOT NULL,
    role TEXT NOT NULL,
    body TEXT NOT NULL,
    audit_id INTEGER,
    PRIMARY KEY (run_id, seq)
);
INSERT INTO "run_messages" VALUES('run-1',0,1.79660227034785437583e+09,'user','{"content":"hello"}',NULL);
CREATE TABLE runs (
    id TEXT PRIMARY KEY,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    ended_at REAL,
    skill TEXT,
    params TEXT NOT NULL,
    message TEXT,
    trigger TEXT NOT NULL,
    session TEXT NOT NULL,
    provider TEXT NOT NULL,
    model TEXT NOT NULL,
    status TEXT NOT NULL,
    stop TEXT,
    error TEXT,
    usage TEXT NOT NULL,
    cost_usd REAL,
    owner TEXT,
    cancel_requested INTEGER NOT NULL DEFAULT 0
);
INSERT INTO "runs" VALUES('run-1',1.79660227034780478477e+09,1.79660227034787821766e+09,1.79660227034787821766e+09,NULL,'{"p":1}','hello','cli','main','openai','gpt-x','done','end',NULL,'{"input_tokens":3}',NULL,'vm/9479:926028',0);
CREATE TABLE trigger_deliveries (
    hook TEXT NOT NULL,
    delivery_id TEXT NOT NULL,
    received_at REAL NOT NULL,
    event TEXT,
    status INTEGER NOT NULL,
    response TEXT NOT NULL,
    PRIMARY KEY (hook, delivery_id)
);
INSERT INTO "trigger_deliveries" VALUES('gh','d-1',1700000000.0,'push',202,'{"accepted":true}');
CREATE TABLE trigger_firings (
    id TEXT PRIMARY KEY,
    ts REAL NOT NULL,
    kind TEXT NOT NULL,
    name TEXT NOT NULL,
    fired_by TEXT NOT NULL,
    skill TEXT,
    session TEXT NOT NULL,
    params TEXT NOT NULL,
    payload TEXT,
    run_id TEXT NOT NULL,
    status TEXT NOT NULL,
    error TEXT,
    request TEXT,
    owner TEXT,
    audit_id INTEGER,
    job TEXT,
    attempt INTEGER NOT NULL DEFAULT 0,
    ended_at REAL
);
INSERT INTO "trigger_firings" VALUES('f-1',1700000000.0,'webhook','gh','hook',NULL,'main','{"a":1}',NULL,'run-2','done',NULL,NULL,NULL,NULL,NULL,0,NULL);
CREATE TABLE trigger_jobs (
    name TEXT PRIMARY KEY,
    source TEXT NOT NULL,
    spec TEXT NOT NULL,
    spec_hash TEXT NOT NULL,
    paused INTEGER NOT NULL DEFAULT 0,
    next_run REAL,
    retry_at REAL,
    attempt INTEGER NOT NULL DEFAULT 0,
    last_run REAL,
    last_status TEXT,
    last_error TEXT,
    last_run_id TEXT,
    run_requested REAL,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL
);
INSERT INTO "trigger_jobs" VALUES('nightly','cli','{"cron":"0 3 * * *","skill":"x"}','h1',0,2000000000.0,NULL,0,NULL,NULL,NULL,NULL,NULL,1.79660227034791541099e+09,1.79660227034791541099e+09);
CREATE TABLE trigger_lease (
    one INTEGER PRIMARY KEY CHECK (one = 1),
    owner TEXT NOT NULL,
    heartbeat REAL NOT NULL
);
CREATE TABLE ui_sign_ins (
    key TEXT PRIMARY KEY,
    token_digest TEXT NOT NULL,
    csrf TEXT NOT NULL,
    created_at REAL NOT NULL,
    last_used REAL NOT NULL
);
INSERT INTO "ui_sign_ins" VALUES('kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk','tttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttt','cccccccccccccccccccccccccccccccc',1.0,2.0);
CREATE INDEX audit_tool_ts ON audit (tool, ts);
CREATE TRIGGER audit_head_advance AFTER INSERT ON audit BEGIN
    UPDATE audit_head SET last_id = NEW.id, last_hash = NEW.hash WHERE one = 1;
END;
CREATE INDEX approvals_status ON approvals (status);
CREATE INDEX idempotency_expiry ON idempotency (expires_at);
CREATE INDEX approvals_binding ON approvals (binding);
CREATE INDEX runs_created ON runs (created_at);
CREATE INDEX trigger_firings_open ON trigger_firings (status, ts)
    WHERE status IN ('queued', 'starting', 'started');
CREATE INDEX trigger_firings_by_name ON trigger_firings (kind, name, ts);
CREATE INDEX trigger_deliveries_received ON trigger_deliveries (received_at);
COMMIT;
