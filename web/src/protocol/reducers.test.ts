/**
 * The TypeScript reducers against the protocol's conformance fixtures, read in
 * place from `../shared/fixtures/reducers` (or `$AHP_FIXTURES_DIR/reducers`),
 * exactly as the Python suite runs them (fixtures/README.md): files in name
 * order, the clock frozen at 9999 ms, `null` meaning absent, inputs never mutated.
 */
import { readFileSync, readdirSync, existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { channelKind, reduce, type ChannelKind, type Json } from './reducers';

const fixtures = process.env.AHP_FIXTURES_DIR ?? resolve(__dirname, '../../../../shared/fixtures');
const folder = join(fixtures, 'reducers');

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

const files = existsSync(folder) ? readdirSync(folder).filter((f) => f.endsWith('.json')).sort() : [];

describe('reducer fixtures', () => {
  it('are present', () => {
    expect(files.length, `no fixtures in ${folder}: set AHP_FIXTURES_DIR`).toBeGreaterThan(100);
  });

  for (const file of files) {
    it(file, () => {
      const case_ = JSON.parse(readFileSync(join(folder, file), 'utf-8'));
      const kind = case_.reducer as ChannelKind;
      // Frozen input: a reducer that mutates its input throws here.
      let state = deepFreeze(normalized(case_.initial));
      for (const action of case_.actions) {
        state = reduce(kind, state, deepFreeze(normalized(action)), () => 9999);
      }
      expect(normalized(state)).toEqual(normalized(case_.expected));
    });
  }
});

describe('channel kinds', () => {
  it('recognises root, session and chat URIs only', () => {
    expect(channelKind('ahp-root://')).toBe('root');
    expect(channelKind('ahp-session:/abc')).toBe('session');
    expect(channelKind('ahp-session:/abc/annotations')).toBeUndefined();
    expect(channelKind('ahp-chat:/x')).toBe('chat');
    expect(channelKind('ahp-terminal:/t')).toBeUndefined();
  });
});

describe('unknown actions', () => {
  it('return the very same state', () => {
    const state = { status: 1, turns: [] };
    expect(reduce('chat', state, { type: 'chat/somethingNew' }, () => 0)).toBe(state);
    expect(reduce('session', state, { type: 'x/y' }, () => 0)).toBe(state);
    expect(reduce('root', state, { type: 'root/new' }, () => 0)).toBe(state);
  });
});
