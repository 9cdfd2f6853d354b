<%@ Page Language="C#" %>
<script runat="server">
    // Rendered in place of a failed request (customErrors, redirectMode="ResponseRewrite"):
    // keeps the failure's HTTP status (500 for an exception, 405 for a refused method ...).
    protected void Page_Load(object sender, EventArgs e)
    {
        HttpException http = Server.GetLastError() as HttpException;
        Response.StatusCode = http != null ? http.GetHttpCode() : 500;
        Response.TrySkipIisCustomErrors = true;
    }
</script>
<!DOCTYPE html>
<html><head><title>Something went wrong</title></head>
<body><h1>Sorry, something went wrong.</h1><p id="error-page">The error was logged.</p></body></html>
