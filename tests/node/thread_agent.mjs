// ThreadAgent: the official HttpAgent with connect(), so connectAgent() restates a thread
// an aguikit endpoint keeps (docs/threads.md).  The endpoint answers POST <url>/connect
// with the thread's restating run: RUN_STARTED, MESSAGES_SNAPSHOT, STATE_SNAPSHOT,
// RUN_FINISHED (with the interrupts still pending).
import {
  HttpAgent,
  enforceOutgoingInput,
  runHttpRequest,
  transformHttpEventStream,
} from "@ag-ui/client";

export class ThreadAgent extends HttpAgent {
  get connectUrl() {
    return `${this.url.replace(/\/+$/, "")}/connect`;
  }

  connect(input) {
    const init = this.requestInit(enforceOutgoingInput(input));
    return transformHttpEventStream(
      runHttpRequest(() => this.fetch(this.connectUrl, init)),
      this.debugLogger,
    );
  }
}
