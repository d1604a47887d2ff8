// The query API (/v1) and the console's own routes, as the signed-in person.

export const session = { me: null };

export class ApiError extends Error {
  constructor(status, body) {
    super(body?.error?.message || `HTTP ${status}`);
    this.status = status;
    this.code = body?.error?.code;
  }
}

export async function api(path, options = {}) {
  const response = await fetch(path, { credentials: "same-origin", ...options });
  const body = await response.json().catch(() => null);
  if (!response.ok) throw new ApiError(response.status, body);
  return body;
}

export function post(path, body) {
  return api(path, {
    method: "POST", body: JSON.stringify(body),
    headers: { "Content-Type": "application/json", "X-CSRF-Token": session.me?.csrf_token || "" },
  });
}

// Send an operator's form and show the dispatcher's verdict in `verdict` (its data-status:
// applied, refused, pending, or error when the request itself was refused).
export async function showVerdict(verdict, send, describe) {
  verdict.textContent = "sent; waiting for the dispatcher's verdict…";
  verdict.className = "verdict";
  try {
    const answer = await send();
    verdict.textContent = describe(answer);
    verdict.className = `verdict ${answer.status === "applied" ? "state-SUCCEEDED" : "error"}`;
    verdict.dataset.status = answer.status;
  } catch (problem) {
    verdict.textContent = `refused: ${problem.message}`;
    verdict.className = "verdict error";
    verdict.dataset.status = "error";
  }
}

export function query(params) {
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) {
    for (const item of [].concat(value)) if (item) search.append(name, item);
  }
  const text = search.toString();
  return text ? `?${text}` : "";
}

export async function allPages(path, params, cap = 20, from = null) {
  const items = [];
  let after = from;
  for (let page = 0; page < cap; page++) {
    const answer = await api(path + query({ ...params, after }));
    items.push(...answer.items);
    if (!answer.next) break;
    after = answer.next;
  }
  return items;
}
