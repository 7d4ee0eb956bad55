// ECharts, tree-shaken to what the screens use and bundled (no CDN). Every chart has a text label for
// screen readers; ECharts' aria module adds a generated description too.

import { useEffect, useRef } from "react";
import * as echarts from "echarts/core";
import { BarChart, HeatmapChart, LineChart } from "echarts/charts";
import { AriaComponent, GridComponent, LegendComponent, TooltipComponent, VisualMapComponent, DataZoomComponent } from "echarts/components";
import { CanvasRenderer } from "echarts/renderers";

echarts.use([BarChart, HeatmapChart, LineChart, AriaComponent, GridComponent, LegendComponent, TooltipComponent, VisualMapComponent, DataZoomComponent, CanvasRenderer]);

export type ChartOption = echarts.EChartsCoreOption;

export const PALETTE = { funded: "#1f6feb", unfunded: "#d98b00", idle: "#c9d1d9", owed: "#6e7781", delivered: "#1a7f37", bad: "#cf222e" };

export function Chart({ option, label, height = 240 }: { option: ChartOption; label: string; height?: number }) {
  const el = useRef<HTMLDivElement>(null);
  const chart = useRef<echarts.ECharts | null>(null);
  useEffect(() => {
    if (!el.current) return;
    chart.current = echarts.init(el.current, undefined, { renderer: "canvas" });
    const ro = new ResizeObserver(() => chart.current?.resize());
    ro.observe(el.current);
    return () => {
      ro.disconnect();
      chart.current?.dispose();
      chart.current = null;
    };
  }, []);
  useEffect(() => {
    chart.current?.setOption({ aria: { enabled: true }, animation: false, textStyle: { fontFamily: "inherit" }, ...option }, true);
  }, [option]);
  return <div className="chart" ref={el} role="img" aria-label={label} style={{ height }} />;
}
