/**
 * The TypeScript reducers against the protocol's conformance fixtures, read in
 * place, exactly as the Python suite runs them (fixtures/README.md;
 * tests/protocol/test_fixtures_reducers.py and test_fixtures_reducers_1_0.py):
 * one test per file, in name order, the clock frozen at 9999 ms, `null`
 * meaning absent, inputs never mutated.
 *
 * - the 0.7 corpus, `../shared/fixtures/reducers` (or
 *   `$AHP_FIXTURES_DIR/reducers`), under the `'0.7'` semantics;
 * - the 1.0 corpus, `../tests/data/fixtures-1.0/reducers` (or
 *   `$AHP_FIXTURES_1_0_DIR/reducers`), under the `'1.0'` semantics. At 1.0 the
 *   chat reducer reads no clock (REDUCER-CHANGES 11): a fixture expecting
 *   `1970-01-01T00:00:09.999Z` would show the clock leaking back in.
 */
import { readFileSync, readdirSync, existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  addMilliseconds,
  channelKind,
  reduce,
  type ChannelKind,
  type Json,
  type Semantics,
} from './reducers';

const WEB = resolve(__dirname, '../..');
const CORPUS_0_7 = join(process.env.AHP_FIXTURES_DIR ?? resolve(WEB, '../../shared/fixtures'), 'reducers');
const CORPUS_1_0 = join(
  process.env.AHP_FIXTURES_1_0_DIR ?? resolve(WEB, '../tests/data/fixtures-1.0'),
  'reducers',
);

/**
 * Reducers of the 1.0 corpus this page does not have: it mirrors the root,
 * session, chat, changeset and terminal channels (reconcile.ts), not the
 * annotations or resource-watch ones. Their fixtures are skipped by name here;
 * the host's Python reducers run them.
 */
const NOT_ON_THE_PAGE = new Set(['annotations', 'resourceWatch']);
const ON_THE_PAGE = ['root', 'session', 'chat', 'changeset', 'terminal'];

/** JSON with every null-valued key dropped, recursively ("null means absent"). */
function normalized(value: Json): Json {
  if (Array.isArray(value)) return value.map(normalized);
  if (value !== null && typeof value === 'object') {
    const out: Json = {};
    for (const [key, item] of Object.entries(value)) {
      if (item !== null && item !== undefined) out[key] = normalized(item);
    }
    return out;
  }
  return value;
}

function deepFreeze(value: Json): Json {
  if (value !== null && typeof value === 'object') {
    for (const item of Object.values(value)) deepFreeze(item);
    Object.freeze(value);
  }
  return value;
}

interface Case {
  file: string;
  body: Json;
}

function corpus(folder: string): Case[] {
  if (!existsSync(folder)) return [];
  return readdirSync(folder)
    .filter((f) => f.endsWith('.json'))
    .sort()
    .map((file) => ({ file, body: JSON.parse(readFileSync(join(folder, file), 'utf-8')) }));
}

function run(body: Json, semantics: Semantics): Json {
  const kind = body.reducer as ChannelKind;
  // Frozen input: a reducer that mutates its input throws here.
  let state = deepFreeze(normalized(body.initial));
  for (const action of body.actions) {
    state = reduce(kind, state, deepFreeze(normalized(action)), () => 9999, semantics);
  }
  return normalized(state);
}

describe('reducer fixtures, 0.7 corpus under 0.7 semantics', () => {
  const cases = corpus(CORPUS_0_7);

  it('are present', () => {
    expect(cases.length, `no fixtures in ${CORPUS_0_7}: set AHP_FIXTURES_DIR`).toBeGreaterThan(100);
  });

  for (const { file, body } of cases) {
    it(file, () => {
      expect(['root', 'session', 'chat']).toContain(body.reducer);
      expect(run(body, '0.7')).toEqual(normalized(body.expected));
    });
  }
});

describe('reducer fixtures, 1.0 corpus under 1.0 semantics', () => {
  const all = corpus(CORPUS_1_0);
  const cases = all.filter(({ body }) => !NOT_ON_THE_PAGE.has(body.reducer));

  it('are present', () => {
    expect(cases.length, `no fixtures in ${CORPUS_1_0}: set AHP_FIXTURES_1_0_DIR`).toBeGreaterThan(90);
  });

  it('name only reducers the page has or skips on purpose', () => {
    const unknown = all
      .map(({ body }) => body.reducer)
      .filter((name) => !NOT_ON_THE_PAGE.has(name) && !ON_THE_PAGE.includes(name));
    expect(unknown).toEqual([]);
  });

  for (const { file, body } of cases) {
    it(file, () => {
      expect(run(body, '1.0')).toEqual(normalized(body.expected));
    });
  }
});

describe('the semantics differ where REDUCER-CHANGES says', () => {
  const turn = {
    id: 't1',
    startedAt: '2026-01-01T00:00:00.000Z',
    message: { text: 'hi', origin: { kind: 'user' } },
    responseParts: [],
  };
  const chat = { resource: 'ahp-chat:/c', title: 'c', status: 8, modifiedAt: 'm', turns: [], activeTurn: turn };
  const error = {
    type: 'chat/error',
    turnId: 't1',
    duration: 1500,
    part: { kind: 'error', error: { errorType: 'E', message: 'boom' }, resumable: true },
    error: { errorType: 'E', message: 'boom' },
  };

  it('chat/error: 1.0 appends the error part, 0.7 keeps turn.error and stamps the clock', () => {
    const v1 = reduce('chat', chat, error, () => 9999, '1.0');
    expect(v1.turns[0].error).toBeUndefined();
    expect(v1.turns[0].responseParts).toEqual([error.part]);
    expect(v1.modifiedAt).toBe('2026-01-01T00:00:01.500Z');
    const v07 = reduce('chat', chat, error, () => 9999, '0.7');
    expect(v07.turns[0].error).toEqual(error.error);
    expect(v07.turns[0].responseParts).toEqual([]);
    expect(v07.modifiedAt).toBe('1970-01-01T00:00:09.999Z');
  });

  it('actions new in 1.0 are no-ops under 0.7', () => {
    const v1 = reduce('chat', chat, error, () => 0, '1.0');
    const resume = { type: 'chat/turnResume', turnId: 't1' };
    expect(reduce('chat', v1, resume, () => 0, '1.0').activeTurn.id).toBe('t1');
    expect(reduce('chat', v1, resume, () => 0, '0.7')).toBe(v1);
    const session = { status: 1, workingDirectories: ['a', 'b'], chats: [] };
    const replaced = { type: 'session/workingDirectoryReplaced', directory: 'b', replacement: 'c' };
    expect(reduce('session', session, replaced, () => 0, '1.0').workingDirectories).toEqual(['a', 'c']);
    expect(reduce('session', session, replaced, () => 0, '0.7')).toBe(session);
  });

  it('session/creationFailed: lifecycle failed at 1.0, creationFailed at 0.7', () => {
    const failed = { type: 'session/creationFailed', error: { errorType: 'E', message: 'no' } };
    expect(reduce('session', { lifecycle: 'creating' }, failed, () => 0, '1.0').lifecycle).toBe('failed');
    expect(reduce('session', { lifecycle: 'creating' }, failed, () => 0, '0.7').lifecycle).toBe('creationFailed');
  });

  it('a toolClientExecution request raises InputNeeded only at 0.7', () => {
    const set = { type: 'session/inputNeededSet', request: { kind: 'toolClientExecution', id: 'r' } };
    expect(reduce('session', { status: 8 }, set, () => 0, '1.0').status).toBe(8);
    expect(reduce('session', { status: 8 }, set, () => 0, '0.7').status).toBe(24);
  });
});

describe('addMilliseconds (REDUCER-CHANGES 11) agrees with the host', () => {
  // Expected values: ahp_server.protocol.reducers._common.add_milliseconds.
  const cases: Array<[string, number, string | undefined]> = [
    ['2026-01-01T02:00:00+02:00', 1500, '2026-01-01T00:00:01.500Z'],
    ['2025-12-31T20:00:00.000-05:00', 0, '2026-01-01T01:00:00.000Z'],
    ['2026-01-01', 1500, '2026-01-01T00:00:01.500Z'],
    ['2026-01-01T05', -0.5, '2026-01-01T04:59:59.999Z'],
    ['2026-01-01T05:06', 1500, '2026-01-01T05:06:01.500Z'],
    ['2026-01-01 05:06:07.1234567Z', 1500, '2026-01-01T05:06:08.623Z'],
    ['2026-01-01T05:06:07.12345678', -0.5, '2026-01-01T05:06:07.122Z'],
    ['20260101T050607Z', 1500, '2026-01-01T05:06:08.500Z'],
    ['2026-01-01T05:06:07,5Z', 1500, '2026-01-01T05:06:09.000Z'],
    ['2026-01-01T05:06:07.5+0530', 1500, '2025-12-31T23:36:09.000Z'],
    ['2026-01-01T05:06:07.123+05:30:15.5', -0.5, '2025-12-31T23:35:51.622Z'],
    ['2026-01-01T05:06:07+05', 1500, '2026-01-01T00:06:08.500Z'],
    ['1969-12-31T23:59:59.9995Z', -0.5, '1969-12-31T23:59:59.999Z'],
    ['0001-01-01T00:00:00Z', -0.5, '0001-01-01T00:00:00.000Z'],
    ['9999-12-31T23:59:59.999Z', 1500, undefined],
    ['2026-01-01T24:00:00Z', 0, undefined],
    ['2026-02-30T00:00:00Z', 0, undefined],
    ['2026-01-01T5:06:07Z', 0, undefined],
    ['2026-01-01T00:00:00Z', 1e20, undefined],
    ['not a date', 0, undefined],
  ];
  for (const [timestamp, duration, expected] of cases) {
    it(`${timestamp} + ${duration}`, () => {
      expect(addMilliseconds(timestamp, duration)).toBe(expected);
    });
  }
});

describe('channel kinds', () => {
  it('recognises root, session, chat, changeset and terminal URIs only', () => {
    expect(channelKind('ahp-root://')).toBe('root');
    expect(channelKind('ahp-session:/abc')).toBe('session');
    expect(channelKind('ahp-session:/abc/annotations')).toBeUndefined();
    expect(channelKind('ahp-chat:/x')).toBe('chat');
    expect(channelKind('ahp-changeset://chat/ahp-chat%3A%2Fx')).toBe('changeset');
    expect(channelKind('ahp-terminal:/t')).toBe('terminal');
    expect(channelKind('file:///x')).toBeUndefined();
  });
});

describe('unknown actions', () => {
  for (const semantics of ['1.0', '0.7'] as const) {
    it(`return the very same state (${semantics})`, () => {
      const state = { status: 1, turns: [] };
      expect(reduce('chat', state, { type: 'chat/somethingNew' }, () => 0, semantics)).toBe(state);
      expect(reduce('session', state, { type: 'x/y' }, () => 0, semantics)).toBe(state);
      expect(reduce('root', state, { type: 'root/new' }, () => 0, semantics)).toBe(state);
      expect(reduce('changeset', state, { type: 'changeset/new' }, () => 0, semantics)).toBe(state);
      expect(reduce('terminal', state, { type: 'terminal/new' }, () => 0, semantics)).toBe(state);
    });
  }
});
