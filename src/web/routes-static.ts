// The browser's files (/static/:name, from src/web/assets/ through html.ts's table) and the pages'
// reply: each page is a fixed shell under a strict CSP that fetches its data from the JSON API.
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from "fastify";
import { PAGE_CSP, STATIC_ASSETS } from "./html.js";

/** Sends one of the pages (src/web/html.ts) with its CSP, never cached; a 404 page with `code` 404. */
export const sendPage = (reply: FastifyReply, html: string, code = 200) =>
  reply
    .code(code)
    .header("Content-Security-Policy", PAGE_CSP)
    .header("Cache-Control", "no-store")
    .type("text/html; charset=utf-8")
    .send(html);

/** A handler that sends one of the pages. */
export const htmlPage = (html: string) => (_req: FastifyRequest, reply: FastifyReply) => sendPage(reply, html);

export const staticRoutes: FastifyPluginAsync = async (app) => {
  app.get<{ Params: { name: string } }>("/static/:name", (req, reply) => {
    const a = STATIC_ASSETS[req.params.name]; // a table without a prototype: /static/constructor is a 404
    if (!a) return reply.code(404).type("text/plain").send("not found\n");
    return reply.header("Cache-Control", "no-cache").type(a.type).send(a.body);
  });
};
