<%@ Application Language="C#" %>
<script runat="server">
    // Application and session events: counted so that the tests can see them fire.
    void Application_Start(object sender, EventArgs e)
    {
        Application["started"] = DateTime.UtcNow.ToString("o");
        Application["requests"] = 0;
        Application["sessions"] = 0;
        WebApiConfig.Register(System.Web.Http.GlobalConfiguration.Configuration);   // Web API routes
    }

    // With EMBER_REFERENCE_ROOT=1 (set by tests/run_aspnet.sh for the shared conformance suite),
    // GET / answers the reference app's hello body instead of Default.aspx.
    static readonly bool ReferenceRoot = System.Environment.GetEnvironmentVariable("EMBER_REFERENCE_ROOT") == "1";

    void Application_BeginRequest(object sender, EventArgs e)
    {
        if (ReferenceRoot && Request.Path == "/" && Request.HttpMethod != "POST")
        {
            Response.ContentType = "application/json";
            Response.Write("{\"code\": 1, \"msg\": \"Hello WebAPI\"}");
            CompleteRequest();
            return;
        }
        Application.Lock();
        int n = (int)Application["requests"] + 1;
        Application["requests"] = n;
        Application.UnLock();
        Response.AppendHeader("X-Request-Number", n.ToString());
    }

    void Session_Start(object sender, EventArgs e)
    {
        Application.Lock();
        Application["sessions"] = (int)Application["sessions"] + 1;
        Application.UnLock();
        Session["visits"] = 0;
    }

    void Application_Error(object sender, EventArgs e)
    {
        Exception ex = Server.GetLastError();
        System.Console.Error.WriteLine("sample site: unhandled " + (ex == null ? "error" : ex.GetBaseException().GetType().Name)
            + " in " + Request.Path);
    }

    void Application_End(object sender, EventArgs e)
    {
        // EMBER_SAMPLE_END_DELAY_MS makes the end slow (the restart tests): Mono's System.Web
        // drops the requests that arrive meanwhile, and the host must take them back.
        int delay;
        if (int.TryParse(System.Environment.GetEnvironmentVariable("EMBER_SAMPLE_END_DELAY_MS"), out delay) && delay > 0)
            System.Threading.Thread.Sleep(delay);
        // The tests set EMBER_SAMPLE_END_FILE to see that Application_End runs on a graceful stop.
        string f = System.Environment.GetEnvironmentVariable("EMBER_SAMPLE_END_FILE");
        if (!string.IsNullOrEmpty(f)) System.IO.File.WriteAllText(f, "Application_End " + Application["requests"]);
    }
</script>
