// Preloaded into qwen-code (NODE_OPTIONS=--import) so that its prompt does not depend on the day
// the test runs: qwen-code writes "The current date is: <weekday, month day, year>" into every
// user turn, and the greedy answer of the model depends on every prompt token. The wall clock
// starts at kStart (UTC; the driver sets TZ=UTC) and runs at the real rate from there, so
// timeouts and durations inside qwen-code are unchanged; only `new Date()` and `Date.now()` move.
const kStart = Date.UTC(2026, 0, 15, 12, 0, 0);
const RealDate = Date;
const offset = kStart - RealDate.now();

// Date with the shifted clock: called without arguments (with or without `new`) it is now on
// that clock; with arguments, and every static and prototype member, it is the real Date.
function FixedClockDate(...args) {
  const now = RealDate.now() + offset;
  if (new.target === undefined) return new RealDate(now).toString();
  return args.length === 0 ? new RealDate(now) : new RealDate(...args);
}
Object.setPrototypeOf(FixedClockDate, RealDate);
FixedClockDate.prototype = RealDate.prototype;
FixedClockDate.now = () => RealDate.now() + offset;

globalThis.Date = FixedClockDate;
