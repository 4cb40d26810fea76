/*
 * Limits more than one layer holds to: here, at the bottom, so that the daemon's API and the agent
 * host that serves the same requests read one number.
 */

/**
 * The most a task, a steer or a follow-up may say. More is not a task but a file, and a request near
 * the server's 1 MiB limit would leave no room for the replies that carry it (runs.list).
 */
export const MAX_TEXT = 32_768;

/**
 * The most steering, and apart from it the most follow-ups, an agent holds unread: past either bound
 * another is refused until the agent takes them. Its snapshot carries what waits, and the server
 * stores no snapshot past 1 MiB; what waits is model input at the agent's next turn.
 */
export const MAX_UNREAD = { messages: 16, chars: 2 * MAX_TEXT };

/**
 * The most an approval's answer may say as its reason: a signed answer stays well under the answers
 * bucket's largest value (16 KiB), whatever the reason's characters take in UTF-8.
 */
export const MAX_REASON = 2000;

/**
 * The most characters one model reply may stream, its text, reasoning and tool calls' arguments
 * together, unless troupe.yaml says otherwise (`providers.NAME.maxReplyChars`). The longest outputs
 * models allow are about 128k tokens, some 600k characters: 4 Mi is far past any real reply, and a
 * reply this long is a server that does not stop. Each streamed character is kept in the run's
 * event log, so this bounds what one turn adds to it.
 */
export const MAX_REPLY_CHARS = 4 * 1024 * 1024;
