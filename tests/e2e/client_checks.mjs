// The check harness of the npm client tests (openai_client/, langchain_client/, ai_sdk_client/):
// one line per check ("ok - name" / "not ok - name: error"), then "N passed, M failed", and the
// exit status the ctest test reads (0 only when every check passed).
// Env of every client test: SYV_URL (http://127.0.0.1:PORT), SYV_KEY (a valid key), SYV_MODEL
// (the served model name).
let passed = 0;
let failed = 0;

export async function check(name, fn) {
  try {
    await fn();
    passed++;
    console.log(`ok - ${name}`);
  } catch (e) {
    failed++;
    console.log(`not ok - ${name}: ${e && e.stack ? e.stack : e}`);
  }
}

export function finish() {
  console.log(`${passed} passed, ${failed} failed`);
  process.exit(failed === 0 ? 0 : 1);
}
