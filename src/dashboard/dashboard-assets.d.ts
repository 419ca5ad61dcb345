/** @module Types of `#dashboard-assets`: the page's script (client/*.ts with uPlot) and style, built by tools/build-dashboard.mjs. */
/** The bundled client (an IIFE, uPlot included). */
export declare const DASHBOARD_SCRIPT: string;
/** uPlot's stylesheet followed by client/dashboard.css. */
export declare const DASHBOARD_STYLE: string;
/** A short hash of script and style, for the page's ETag. */
export declare const DASHBOARD_VERSION: string;
